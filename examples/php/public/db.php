<?php
// SQLite workload: 10 inserts, 10 updates, 10 selects, 5 SELECT *, 5 LIKE selects and
// one delete, answered with the counts as JSON.
//
// Under many concurrent php-cgi workers:
// - busy timeout (PDO::ATTR_TIMEOUT, seconds): a writer that finds the database locked
//   waits up to this long instead of failing with "database is locked";
// - WAL journal: readers and the writer do not block each other;
// - BEGIN IMMEDIATE takes the write lock when the transaction starts (waiting on the busy
//   timeout), so it never has to upgrade a read lock later, which fails at once with
//   SQLITE_BUSY when another worker wrote in between.
// Each request works on rows of its own token, so the counts are exact under load.
require __DIR__ . '/../lib/db.php';

header('Content-Type: application/json');
try {
    $db = open_db();
    $token = bin2hex(random_bytes(16));
    $db->exec('BEGIN IMMEDIATE');
    $insert = $db->prepare('INSERT INTO items (token, name, value) VALUES (?, ?, ?)');
    $ids = [];
    for ($i = 0; $i < 10; $i++) {
        $insert->execute([$token, "$token-$i", $i]);
        $ids[] = (int) $db->lastInsertId();
    }
    $update = $db->prepare('UPDATE items SET value = value + 100 WHERE id = ?');
    $updates = 0;
    foreach ($ids as $id) {
        $update->execute([$id]);
        $updates += $update->rowCount();
    }
    $select = $db->prepare('SELECT value FROM items WHERE id = ?');
    $values = [];
    foreach ($ids as $id) {
        $select->execute([$id]);
        $v = $select->fetchColumn();
        if ($v !== false) $values[] = (int) $v;
    }
    $all = $db->prepare('SELECT * FROM items WHERE token = ?');
    $selectAllRows = 0;
    for ($i = 0; $i < 5; $i++) {
        $all->execute([$token]);
        $selectAllRows += count($all->fetchAll(PDO::FETCH_ASSOC));
    }
    $like = $db->prepare('SELECT id, name FROM items WHERE name LIKE ?');
    $likeRows = 0;
    for ($i = 0; $i < 5; $i++) {
        $like->execute(["%$token-%"]);
        $likeRows += count($like->fetchAll(PDO::FETCH_ASSOC));
    }
    $delete = $db->prepare('DELETE FROM items WHERE token = ?');
    $delete->execute([$token]);
    $deleted = $delete->rowCount();
    $db->exec('COMMIT');
    echo json_encode([
        'inserts' => count($ids),
        'updates' => $updates,
        'selects' => count($values),
        'value_sum' => array_sum($values),
        'select_all_rows' => $selectAllRows,
        'like_rows' => $likeRows,
        'deleted' => $deleted,
    ]), "\n";
} catch (Throwable $e) {
    if (isset($db) && $db->inTransaction()) $db->rollBack();
    error_log('db.php: ' . $e->getMessage());
    http_response_code(500);
    echo json_encode(['error' => $e->getMessage()]), "\n";
}
