"""Run one Swift WSGI server from a throwaway directory (tests only).

usage: /usr/bin/python3 launch.py ETC_DIR KIND CONF_FILE
KIND is account, container, object or proxy.

Swift 2.30 reads /etc/swift/swift.conf when it is imported; set_swift_dir makes it
use ETC_DIR/swift.conf instead (hash prefix/suffix and storage policy of the test
server). Syslog is replaced by a no-op handler so no rsyslog is needed; verbose=True
sends the log to stderr, which start.sh redirects to DIR/log/KIND.log.
"""
import logging
import sys


class _NoSyslog(logging.Handler):
    def __init__(self, *args, **kwargs):
        logging.Handler.__init__(self)

    def emit(self, record):
        pass


def main():
    if len(sys.argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    etc, kind, conf = sys.argv[1:]
    from swift.common import utils
    utils.ThreadSafeSysLogHandler = _NoSyslog
    utils.set_swift_dir(etc)
    from swift.common.wsgi import run_wsgi
    return run_wsgi(conf, kind + '-server', verbose=True)


if __name__ == '__main__':
    sys.exit(main())
