<?php
// What the front end sent: CGI variables and a digest of the body, as JSON. Used by
// the front-end tests to check SCRIPT_NAME / PATH_INFO / query handling.
header('Content-Type: application/json');
$keys = ['REQUEST_METHOD', 'SCRIPT_NAME', 'SCRIPT_FILENAME', 'PATH_INFO', 'REQUEST_URI', 'QUERY_STRING',
         'CONTENT_TYPE', 'CONTENT_LENGTH', 'SERVER_PROTOCOL', 'GATEWAY_INTERFACE', 'HTTP_HOST'];
$cgi = [];
foreach ($keys as $k) $cgi[$k] = $_SERVER[$k] ?? null;
$body = file_get_contents('php://input');
echo json_encode([
    'cgi' => $cgi,
    'get' => $_GET,
    'body_bytes' => strlen($body),
    'body_sha256' => hash('sha256', $body),
], JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE), "\n";
