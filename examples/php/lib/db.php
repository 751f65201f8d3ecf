<?php
// The example's SQLite database: its path from the APP_DB_PATH environment variable
// (set in the pool's `env:` in fcgi-pm.yaml), else a file in the system temp dir.
function open_db(): PDO
{
    $path = getenv('APP_DB_PATH') ?: sys_get_temp_dir() . '/fcgi-pm-example-php.sqlite3';
    $db = new PDO('sqlite:' . $path, null, null, [
        PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION,
        PDO::ATTR_TIMEOUT => 20, // busy timeout, seconds
    ]);
    $db->exec('PRAGMA journal_mode=WAL');
    $db->exec('PRAGMA synchronous=NORMAL');
    $db->exec('CREATE TABLE IF NOT EXISTS items (
        id INTEGER PRIMARY KEY,
        token TEXT NOT NULL,
        name TEXT NOT NULL,
        value INTEGER NOT NULL DEFAULT 0)');
    $db->exec('CREATE INDEX IF NOT EXISTS items_token ON items (token)');
    return $db;
}
