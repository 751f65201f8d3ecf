<?php
// A FastCGI authorizer (FastCGI specification 6.3) for php-cgi, which takes the role
// FCGI_AUTHORIZER itself and says so in $_SERVER['FCGI_ROLE']. The same decisions as
// token_authorizer.py: it allows requests that carry "Authorization: Bearer TOKEN" with
// a token listed in the environment variable AUTH_TOKENS (the pool's env:).
//
//   AUTH_TOKENS="alice:tok1,bob:tok2:/public/"    NAME:TOKEN[:PATH_PREFIX], comma-separated
//
//   known token, path allowed   200, Variable-REMOTE_USER: NAME, Variable-AUTH_TYPE: Bearer
//   PATH_PREFIX, another path   403 and a text body (REQUEST_URI's path, undecoded; one
//                               holding '%' or "/." is outside every prefix)
//   no or unknown token         401, WWW-Authenticate: Bearer realm="fcgi-pm", a text body
//   not an authorizer request   500 (a front end set up as for a responder)
//   a bad AUTH_TOKENS           500, the reason in the error log
//
// php-cgi runs the script SCRIPT_FILENAME names: the authorizer request must name this file.

function answer(int $status, string $text, array $headers = []): void
{
    http_response_code($status);
    header('Content-Type: text/plain; charset=utf-8');
    foreach ($headers as $h) {
        header($h);
    }
    echo $text;
}

/** [[name, token, prefix or null]], or null when an entry is malformed. */
function parse_tokens(string $spec): ?array
{
    $entries = [];
    foreach (explode(',', $spec) as $entry) {
        $entry = trim($entry, " \t");
        if ($entry === '') {
            continue;
        }
        $parts = explode(':', $entry);
        if ((count($parts) !== 2 && count($parts) !== 3) || in_array('', $parts, true)) {
            error_log("auth.php: AUTH_TOKENS: \"$entry\" is not NAME:TOKEN or NAME:TOKEN:PATH_PREFIX");
            return null;
        }
        $entries[] = [$parts[0], $parts[1], $parts[2] ?? null];
    }
    return $entries;
}

/** The entry whose token the header carries; every entry is compared, in constant time. */
function find_user(array $entries, string $authorization): ?array
{
    $parts = explode(' ', trim($authorization, " \t"), 2);
    if (count($parts) !== 2 || strcasecmp($parts[0], 'Bearer') !== 0) {
        return null;
    }
    $token = trim($parts[1], " \t");
    $found = null;
    foreach ($entries as $e) {
        if (hash_equals($e[1], $token)) {
            $found = $e;
        }
    }
    return $found;
}

function path_allowed(string $request_uri, ?string $prefix): bool
{
    if ($prefix === null) {
        return true;
    }
    $path = explode('?', $request_uri, 2)[0];
    return str_starts_with($path, $prefix) && !str_contains($path, '%') && !str_contains($path, '/.');
}

if (($_SERVER['FCGI_ROLE'] ?? '') !== 'AUTHORIZER') {
    answer(500, "this program answers FastCGI authorizer requests only\n");
    return;
}
// local_only: the process's environment, never a request variable of that name.
$entries = parse_tokens((string) getenv('AUTH_TOKENS', true));
if ($entries === null) {
    answer(500, "500 Internal Server Error: the authorizer is misconfigured\n");
    return;
}
$user = find_user($entries, $_SERVER['HTTP_AUTHORIZATION'] ?? '');
if ($user === null) {
    answer(401, "401 Unauthorized: a valid bearer token is needed\n", ['WWW-Authenticate: Bearer realm="fcgi-pm"']);
    return;
}
[$name, , $prefix] = $user;
if (!path_allowed($_SERVER['REQUEST_URI'] ?? '', $prefix)) {
    answer(403, "403 Forbidden: $name may only use $prefix\n");
    return;
}
// A 200's body is ignored by the front end: headers only.
header("Variable-REMOTE_USER: $name");
header('Variable-AUTH_TYPE: Bearer');
