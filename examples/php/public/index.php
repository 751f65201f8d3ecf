<?php header('Content-Type: text/html; charset=utf-8'); ?>
<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>fcgi-pm PHP example</title></head>
<body>
<h1>fcgi-pm PHP example</h1>
<ul>
  <li><a href="page.php">A page of 8,750 bytes</a></li>
  <li><a href="db.php">SQLite workload</a></li>
  <li><a href="echo.php?x=1">What the front end sent</a></li>
</ul>
</body>
</html>
