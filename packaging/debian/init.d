#!/bin/sh
### BEGIN INIT INFO
# Provides:          fcgi-pm
# Required-Start:    $local_fs $remote_fs $network $syslog
# Required-Stop:     $local_fs $remote_fs $network $syslog
# Default-Start:     2 3 4 5
# Default-Stop:      0 1 6
# Short-Description: FastCGI/SCGI application process manager
# Description:       fcgi-pm spawns php-cgi, WSGI and other FastCGI/SCGI workers
#                    on demand behind nginx, Apache, lighttpd or HAProxy.
### END INIT INFO
#
# fcgi-pm without systemd (sysvinit, OpenRC's LSB support): the daemon is started in the
# background by start-stop-daemon, writes its pid to $PIDFILE itself, and keeps that pid
# through an upgrade in place (upgrade: exec). Under systemd, fcgi-pm.service is used
# instead. Settings in /etc/default/fcgi-pm:
#   CONFIG=/etc/fcgi-pm/fcgi-pm.yaml   the config file
#   PIDFILE=/run/fcgi-pm.pid           passed to the daemon (run --pid-file)
#   OUTPUT=/var/log/fcgi-pm/fcgi-pm.out  what the daemon writes to stdout and stderr
#                                      (its log when log.file is unset; a crash)
#   READY_TIMEOUT=60                   seconds start waits for the daemon to be ready
#   STOP_TIMEOUT=60                    seconds stop waits before SIGKILL (above shutdown_timeout)
#   DAEMON_ARGS=                       more options for `fcgi-pm run` (e.g. --allow-root)
#
# Actions: start, stop, restart, reload (re-reads the config; refused with its errors
# when invalid), force-reload, upgrade (the installed code in place: same pid, no
# refused connection), reopen-logs, configtest, status.

PATH=/usr/sbin:/usr/bin:/sbin:/bin
NAME=fcgi-pm
DESC="FastCGI process manager"
DAEMON=/usr/bin/fcgi-pm
CONFIG=/etc/fcgi-pm/fcgi-pm.yaml
PIDFILE=/run/fcgi-pm.pid
OUTPUT=/var/log/fcgi-pm/fcgi-pm.out
READY_TIMEOUT=60
STOP_TIMEOUT=60
DAEMON_ARGS=

[ -x "$DAEMON" ] || exit 0
[ -r /etc/default/$NAME ] && . /etc/default/$NAME

. /lib/lsb/init-functions

running() {
    [ -s "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null
}

configtest() {
    if ! out=$("$DAEMON" check -c "$CONFIG" 2>&1); then
        printf '%s\n' "$out" >&2
        return 1
    fi
}

# Waits until the daemon answers ready on its control socket (with control_socket: off,
# until it runs); fails as soon as it exited (a config the host checks refuse, a port in use).
wait_ready() {
    until=$(( $(date +%s) + READY_TIMEOUT ))
    while running; do
        "$DAEMON" ready -q -c "$CONFIG" >/dev/null 2>&1
        case $? in
            0) return 0 ;;
            3) grep -Eq '^control_socket:[[:space:]]*off' "$CONFIG" && return 0 ;;
        esac
        if [ "$(date +%s)" -ge "$until" ]; then
            log_progress_msg "not ready after ${READY_TIMEOUT}s"
            return 1
        fi
        sleep 0.2
    done
    return 1
}

do_start() {
    if running; then
        log_progress_msg "already running"
        return 0
    fi
    configtest || return 1
    mkdir -p "$(dirname "$OUTPUT")"
    # The process start-stop-daemon forks is the daemon (bin/fcgi-pm execs node): its pid
    # goes in the pid file at once, and the daemon writes the same one when it starts.
    # shellcheck disable=SC2086
    start-stop-daemon --start --quiet --background --make-pidfile --pidfile "$PIDFILE" --output "$OUTPUT" \
        --startas "$DAEMON" -- run -c "$CONFIG" --pid-file "$PIDFILE" $DAEMON_ARGS || return 1
    if ! wait_ready; then
        tail -n 5 "$OUTPUT" >&2 2>/dev/null
        return 1
    fi
}

do_stop() {
    running || { rm -f "$PIDFILE"; return 0; }
    # SIGTERM: running requests finish (shutdown_timeout), then the workers are stopped.
    start-stop-daemon --stop --quiet --retry "TERM/$STOP_TIMEOUT/KILL/5" --pidfile "$PIDFILE"
    rc=$?
    [ "$rc" -eq 0 ] || [ "$rc" -eq 1 ] || return 1
    rm -f "$PIDFILE"
}

case "$1" in
    start)
        log_daemon_msg "Starting $DESC" "$NAME"
        do_start
        log_end_msg $?
        ;;
    stop)
        log_daemon_msg "Stopping $DESC" "$NAME"
        do_stop
        log_end_msg $?
        ;;
    restart)
        log_daemon_msg "Restarting $DESC" "$NAME"
        configtest || { log_end_msg 1; exit 1; }
        do_stop && do_start
        log_end_msg $?
        ;;
    reload|force-reload)
        log_daemon_msg "Reloading $DESC" "$NAME"
        if running; then
            "$DAEMON" reload -c "$CONFIG" >/dev/null
        else
            log_progress_msg "not running"
            false
        fi
        log_end_msg $?
        ;;
    upgrade)
        log_daemon_msg "Upgrading $DESC in place" "$NAME"
        if running; then
            "$DAEMON" upgrade -c "$CONFIG" >/dev/null
        else
            do_start
        fi
        log_end_msg $?
        ;;
    reopen-logs|rotate)
        "$DAEMON" reopen-logs -c "$CONFIG"
        ;;
    configtest|check)
        "$DAEMON" check -c "$CONFIG"
        ;;
    status)
        status_of_proc -p "$PIDFILE" "$DAEMON" "$NAME"
        ;;
    *)
        echo "Usage: /etc/init.d/$NAME {start|stop|restart|reload|force-reload|upgrade|reopen-logs|configtest|status}" >&2
        exit 3
        ;;
esac
