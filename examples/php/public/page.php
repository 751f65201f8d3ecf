<?php
// A page of exactly 8,750 bytes, built on every request and padded inside a comment:
// the same size as the Django example's page, so the two can be benchmarked alike.
const PAGE_BYTES = 8750;

header('Content-Type: text/html; charset=utf-8');
$rows = '';
for ($i = 1; $i <= 40; $i++) {
    $rows .= "  <tr><td>Row $i</td><td>Lorem ipsum dolor sit amet, consectetur adipiscing elit.</td></tr>\n";
}
$html = <<<HTML
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>A page of 8,750 bytes</title>
</head>
<body>
<h1>A page of 8,750 bytes</h1>
<p>This page is built by PHP on every request and padded to exactly
8,750 bytes, the same size as the Django example's page.</p>
<table>
$rows</table>
</body>
</html>

HTML;
$pad = PAGE_BYTES - strlen($html) - strlen("<!--  -->\n");
echo $html, '<!-- ', str_repeat('.', $pad), " -->\n";
