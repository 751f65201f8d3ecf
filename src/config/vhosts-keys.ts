/**
 * Keys of the `vhosts` section (where site definitions come from) and of one site
 * definition (a file in vhosts.dir, or a table row); docs/vhosts.md describes both.
 */
import type { KeySpec } from './key-spec.js';

export const VHOSTS_KEYS: readonly KeySpec[] = [
  { key: 'dir', field: 'dir', type: { kind: 'path' }, doc: 'Directory of site files, one NAME.yaml (or .yml, .json) per site; NAME is the site id and its pool name. Added, changed and removed files apply without a restart.' },
  { key: 'sqlite', field: 'sqlite', type: { kind: 'path' }, doc: 'SQLite database file whose `table` holds one row per site (columns in docs/vhosts.md); changes apply without a restart.' },
  { key: 'postgres', field: 'postgres', type: { kind: 'string' }, doc: 'PostgreSQL connection URL ("postgres://user@host:5432/db") whose `table` holds one row per site, which several daemons may share; changes apply without a restart (at once with the NOTIFY trigger of docs/vhosts.md).' },
  { key: 'table', field: 'table', type: { kind: 'string' }, default: 'sites', doc: 'Table of sites in the sqlite or postgres database.' },
  { key: 'idle_timeout', field: 'idleTimeout', type: { kind: 'duration', min: 1000 }, default: '10m', doc: "A site that got no request for this long is evicted: its workers stop and its pool is freed; the next request starts it again." },
  { key: 'poll_interval', field: 'pollInterval', type: { kind: 'duration', min: 100 }, default: '2s', doc: 'How often the table is checked for changes, or the directory checked besides watching it: a rescan of every file when it cannot be watched; while watched, a stat of the directory and of a tenth of the files in turn, with a rescan when one changed (an edit whose watch event was lost is seen within ten intervals).' },
  { key: 'default_site', field: 'defaultSite', type: { kind: 'string' }, defaultText: '(none: 404)', doc: 'Site id that serves requests whose host no site names; without it they get 404 ERR_VHOST_UNKNOWN.' },
  { key: 'site_max_children', field: 'siteMaxChildren', type: { kind: 'int', min: 0 }, default: 0, doc: "The most workers any one site may run (0 = no cap beyond each site's own max_children): a site's file or row asking for more gets this many (and its start_children and spares no more), so one tenant cannot set itself a share of the host. With max_children_total each active site can still always reach its fair share of the total." },
  { key: 'defaults', field: 'defaults', type: { kind: 'mapping' }, default: {}, doc: "Pool settings every site starts from (command, user, pm, max_children...); a site's own `pool` settings override them." },
];

export const SITE_KEYS: readonly KeySpec[] = [
  { key: 'names', field: 'names', type: { kind: 'string-list' }, required: true, doc: 'Host names of the site: exact names ("www.example.org") or wildcards ("*.example.org": any name under it; the longest match wins). A single string may list several, separated by spaces or commas.' },
  { key: 'document_root', field: 'documentRoot', type: { kind: 'path' }, required: true, doc: "The site's directory: SCRIPT_FILENAME is resolved in it and must lie in it (its pool's script_roots)." },
  { key: 'rewrite', field: 'rewrite', type: { kind: 'rewrite' }, default: [], defaultText: '(none)', doc: 'Rewrite rules of the site (as listen[].rewrite), tried before the listener\'s.' },
  { key: 'pool', field: 'pool', type: { kind: 'mapping' }, default: {}, doc: 'Pool settings (as under pools.<name>), over vhosts.defaults. The pool starts with zero workers, pm ondemand, unless set otherwise.' },
];
