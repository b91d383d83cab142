import { describe, expect, it } from 'vitest';
import { importFailure } from './upload';

describe('the import failure sentence', () => {
  it('says nothing was imported once, whether or not the server already said it', () => {
    expect(importFailure('the file has errors; nothing was imported')).toBe('The file has errors; nothing was imported.');
    expect(importFailure('the file has errors')).toBe('The file has errors. Nothing was imported.');
    expect(importFailure('')).toBe('Nothing was imported.');
  });
});
