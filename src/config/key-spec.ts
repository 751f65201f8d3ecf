/**
 * The shape of one configuration key as data (keys.ts and the key tables beside it hold
 * the keys themselves): its type, default, scope and description.
 */

export type KeyType =
  | { kind: 'int'; min: number; max?: number }
  | { kind: 'duration'; min: number }
  | { kind: 'size'; min: number; max: number }
  /** auto: the word auto is a third value, resolved by the code that reads the key. */
  | { kind: 'bool'; auto?: true }
  | { kind: 'string' }
  /** A filesystem path; relative ones are resolved against the config file's directory. */
  | { kind: 'path' }
  | { kind: 'enum'; values: readonly string[] }
  | { kind: 'address' }
  /** A list of addresses (a single string is taken as a list of one). */
  | { kind: 'addresses' }
  /** argv: a list of strings, or one string split at spaces. */
  | { kind: 'argv' }
  | { kind: 'string-map' }
  | { kind: 'string-list' }
  /** Unix file mode, octal: "0660". */
  | { kind: 'mode' }
  /** memory_budget: a size ("512MiB"), a percentage of MemTotal or of the cgroup limit ("50%") or "auto". */
  | { kind: 'budget' }
  // Operations (docs/operations.md).
  /** A URL path starting with "/" (status_path, ping_path). */
  | { kind: 'url-path' }
  /** status_allow: CIDR blocks, addresses, or the words unix, local, all (src/config/cidr.ts). */
  | { kind: 'allow-list' }
  /** allowed_clients: addresses and CIDR blocks only (src/config/cidr.ts). */
  | { kind: 'client-list' }
  /** A user or group: a name from /etc/passwd or /etc/group, or a numeric id (src/config/system-users.ts). */
  | { kind: 'user' }
  | { kind: 'group' }
  /** access_format: json, fpm, or a %-format (src/config/access-format.ts). */
  | { kind: 'access-format' }
  /** A path, or "off" (false) to disable. */
  | { kind: 'path-or-off' }
  /** limit_extensions: ".php .phar", a list of ".ext", or off / [] (none). */
  | { kind: 'extensions' }
  /** A list of filesystem paths (a single string is a list of one), resolved like `path`. */
  | { kind: 'paths' }
  /** A mapping checked later by its user (vhosts.defaults, a site's pool settings). */
  | { kind: 'mapping' }
  /** Rewrite rules: { match: REGEX, to: /script?query } and { front_controller: /index.php } (docs/vhosts.md). */
  | { kind: 'rewrite' };

/** Where a key is allowed: some keys only make sense for one kind of pool or listener. */
export type KeyScope = 'spawned' | 'external' | 'http';

export interface KeySpec {
  /** snake_case, as in the file. */
  key: string;
  /** camelCase property in src/config/types.ts. */
  field: string;
  type: KeyType;
  /** Default in file form ("10s", "64KiB"); undefined = unset unless `required`. */
  default?: unknown;
  /** For the key table when the default is derived rather than a constant. */
  defaultText?: string;
  required?: boolean;
  scope?: KeyScope;
  doc: string;
}
