// CSV upload with progress: fetch() (and so `@authoric/client`'s `importCsv`) cannot report
// upload progress, XMLHttpRequest can. The one call the console makes outside the library.
import { AuthoricError } from './client';

interface ErrorBody { code: string; message: string; details?: Record<string, unknown> }

export function uploadCsv(url: string, token: string, file: Blob,
                          onProgress: (fraction: number) => void): Promise<{ inserted: number }> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', url);
    xhr.setRequestHeader('Authorization', `Bearer ${token}`);
    xhr.setRequestHeader('Content-Type', 'text/csv');
    xhr.upload.onprogress = (e) => {
      if (e.lengthComputable) onProgress(e.loaded / e.total);
    };
    xhr.onload = () => {
      onProgress(1);
      let body: unknown = null;
      try {
        body = JSON.parse(xhr.responseText);
      } catch {
        body = null;
      }
      if (xhr.status >= 200 && xhr.status < 300) resolve(body as { inserted: number });
      else {
        const error = (body as { error?: ErrorBody } | null)?.error ??
          { code: `HTTP_${xhr.status}`, message: xhr.statusText, details: {} };
        reject(new AuthoricError(xhr.status, error.code, error.message, error.details ?? {}));
      }
    };
    xhr.onerror = () => reject(new Error('the upload failed (network)'));
    xhr.send(file);
  });
}

/** The one sentence an all-or-nothing import failure shows: the server's message as a
 *  sentence, saying that nothing was imported exactly once. */
export function importFailure(message: string): string {
  const text = message.trim().replace(/[.;:,\s]+$/, '');
  const sentence = text ? `${text[0].toUpperCase()}${text.slice(1)}.` : '';
  return /nothing (was|is|has been) (imported|written)/i.test(sentence)
    ? sentence : `${sentence}${sentence ? ' ' : ''}Nothing was imported.`;
}
