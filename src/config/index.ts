/** The config module's public face. */
export { loadConfig, parseConfigText } from './load.js';
export { configFromObject, poolConfigFromObject, formatKeyPath, type Locator, type KeyPath, type FromObjectOptions } from './schema.js';
export { Problems, type ConfigOrigin } from './problems.js';
export { CONFIG_KEYS, type KeyDoc } from './keys.js';
export { parseDuration, parseSize, formatDuration, formatSize } from './units.js';
export { ConfigError } from '../errors.js';
export type * from './types.js';
