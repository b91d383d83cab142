// The list of apps the admin token sees, shared by the app switcher and the apps page.
import { admin } from './session.svelte';
import type { App, Page } from './types';

export const apps = $state<{ items: App[] }>({ items: [] });

export async function loadApps(): Promise<void> {
  apps.items = (await admin<Page<App>>('GET', '/apps')).items;
}
