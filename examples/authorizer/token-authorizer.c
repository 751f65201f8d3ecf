/*
 * token-authorizer: a FastCGI authorizer (FastCGI specification 6.3) on libfcgi. It
 * allows requests that carry "Authorization: Bearer TOKEN" with a token listed in the
 * environment variable AUTH_TOKENS, the same decisions as token_authorizer.py:
 *
 *   AUTH_TOKENS="alice:tok1,bob:tok2:/public/"    NAME:TOKEN[:PATH_PREFIX], comma-separated
 *
 *   known token, path allowed   200, Variable-REMOTE_USER: NAME, Variable-AUTH_TYPE: Bearer
 *   PATH_PREFIX, another path   403 and a text body (REQUEST_URI's path, undecoded; one
 *                               holding '%' or "/." is outside every prefix)
 *   no or unknown token         401, WWW-Authenticate: Bearer realm="fcgi-pm", a text body
 *   not an authorizer request   500 (a front end set up as for a responder)
 *
 * Build: cc -O2 -o token-authorizer token-authorizer.c -lfcgi   (Debian: libfcgi-dev)
 * It serves on the listening socket it gets as fd 0 (fcgi-pm's socket: fd0, spawn-fcgi),
 * one request at a time. A bad AUTH_TOKENS makes it exit 1 at start with the reason on
 * stderr.
 */
#include <fcgiapp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct entry {
    const char *name, *token, *prefix; /* prefix NULL: any path */
};

static struct entry *entries;
static size_t n_entries;

/* s's length without trailing blanks. */
static size_t trimmed_length(const char *s, size_t len)
{
    while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
        len--;
    return len;
}

/* Splits a private copy of AUTH_TOKENS in place; 0 on success. */
static int parse_tokens(const char *spec)
{
    char *copy = strdup(spec ? spec : ""), *save = NULL;
    if (copy == NULL)
        return -1;
    for (char *item = strtok_r(copy, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
        item += strspn(item, " \t");
        item[trimmed_length(item, strlen(item))] = '\0';
        if (*item == '\0')
            continue;
        char *parts[4] = {item, NULL, NULL, NULL};
        int n = 1;
        for (char *p = item; *p != '\0' && n < 4; p++)
            if (*p == ':') {
                *p = '\0';
                parts[n++] = p + 1;
            }
        int ok = (n == 2 || n == 3);
        for (int i = 0; ok && i < n; i++)
            ok = *parts[i] != '\0';
        if (!ok) {
            fprintf(stderr, "token-authorizer: AUTH_TOKENS: \"%s\" is not NAME:TOKEN or NAME:TOKEN:PATH_PREFIX\n", item);
            return -1;
        }
        struct entry *grown = realloc(entries, (n_entries + 1) * sizeof *entries);
        if (grown == NULL)
            return -1;
        entries = grown;
        entries[n_entries++] = (struct entry){parts[0], parts[1], n == 3 ? parts[2] : NULL};
    }
    return 0;
}

/* Compares all of both strings, so the time taken does not tell how close a guess was. */
static int same(const char *a, size_t la, const char *b)
{
    size_t lb = strlen(b), n = la > lb ? la : lb;
    unsigned char diff = la != lb;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)((i < la ? a[i] : 0) ^ (i < lb ? b[i] : 0));
    return diff == 0;
}

/* The entry whose token "Bearer TOKEN" carries; every entry is compared. */
static const struct entry *find_user(const char *authorization)
{
    if (authorization == NULL)
        return NULL;
    authorization += strspn(authorization, " \t");
    if (strncasecmp(authorization, "Bearer ", 7) != 0) /* schemes are case-insensitive */
        return NULL;
    const char *token = authorization + 7 + strspn(authorization + 7, " \t");
    size_t len = trimmed_length(token, strlen(token));
    const struct entry *found = NULL;
    for (size_t i = 0; i < n_entries; i++)
        if (same(token, len, entries[i].token))
            found = &entries[i];
    return found;
}

static int path_allowed(const char *request_uri, const char *prefix)
{
    if (prefix == NULL)
        return 1;
    if (request_uri == NULL)
        return 0;
    size_t len = strcspn(request_uri, "?");
    for (size_t i = 0; i < len; i++)
        if (request_uri[i] == '%' || (request_uri[i] == '/' && request_uri[i + 1] == '.'))
            return 0;
    return len >= strlen(prefix) && strncmp(request_uri, prefix, strlen(prefix)) == 0;
}

/*
 * libfcgi puts its own FCGI_ROLE (from BEGIN_REQUEST) first in envp, where
 * FCGX_GetParam finds it; a responder request that carries FCGI_ROLE=AUTHORIZER (how
 * fcgi-pm asks a worker that speaks only the responder role) has it further on.
 */
static int is_authorizer(FCGX_ParamArray envp)
{
    for (; *envp != NULL; envp++)
        if (strcmp(*envp, "FCGI_ROLE=AUTHORIZER") == 0)
            return 1;
    return 0;
}

static void text_answer(FCGX_Stream *out, const char *status, const char *extra_header, const char *body)
{
    /* libfcgi's own printf knows no %zu */
    FCGX_FPrintF(out, "Status: %s\r\n%sContent-Type: text/plain; charset=utf-8\r\nContent-Length: %lu\r\n\r\n%s",
                 status, extra_header, (unsigned long)strlen(body), body);
}

static void answer(FCGX_Request *req)
{
    if (!is_authorizer(req->envp)) {
        text_answer(req->out, "500 Internal Server Error", "", "this program answers FastCGI authorizer requests only\n");
        return;
    }
    const struct entry *user = find_user(FCGX_GetParam("HTTP_AUTHORIZATION", req->envp));
    if (user == NULL) {
        text_answer(req->out, "401 Unauthorized", "WWW-Authenticate: Bearer realm=\"fcgi-pm\"\r\n",
                    "401 Unauthorized: a valid bearer token is needed\n");
        return;
    }
    if (!path_allowed(FCGX_GetParam("REQUEST_URI", req->envp), user->prefix)) {
        char body[1024];
        snprintf(body, sizeof body, "403 Forbidden: %s may only use %s\n", user->name, user->prefix);
        text_answer(req->out, "403 Forbidden", "", body);
        return;
    }
    /* A 200's body is ignored by the front end: the head is the whole answer. */
    FCGX_FPrintF(req->out, "Status: 200 OK\r\nVariable-REMOTE_USER: %s\r\nVariable-AUTH_TYPE: Bearer\r\n\r\n", user->name);
}

int main(void)
{
    if (parse_tokens(getenv("AUTH_TOKENS")) != 0)
        return 1;
    if (FCGX_Init() != 0)
        return 1;
    FCGX_Request req;
    FCGX_InitRequest(&req, 0, 0); /* fd 0: FCGI_LISTENSOCK_FILENO */
    while (FCGX_Accept_r(&req) >= 0) {
        answer(&req);
        FCGX_Finish_r(&req);
    }
    return 0;
}
