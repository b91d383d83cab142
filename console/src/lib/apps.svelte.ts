// The list of apps the admin token sees, shared by the app switcher and the apps page.
import { platform } from './session.svelte';
import type { App } from './types';

export const apps = $state<{ items: App[] }>({ items: [] });

export async function loadApps(): Promise<void> {
  apps.items = (await platform().apps.list()).items;
}
