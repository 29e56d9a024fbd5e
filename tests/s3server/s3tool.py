"""Helpers for the throwaway Swift + s3api test server (tests only, stdlib only).

usage:
  s3tool.py setup SRCDIR DIR        pick free loopback ports, write DIR/etc (configs
                                    from SRCDIR/tests/s3server/conf, rings) and DIR/srv;
                                    print the ports as shell assignments
  s3tool.py wait DIR SECONDS        wait until every server answers /healthcheck and a
                                    signed ListBuckets returns 200; exit 3 when one of
                                    DIR/pids died (e.g. its port was taken), 1 on timeout
  s3tool.py fake DIR WATCH_PID      a fake S3 endpoint for retry tests: answers every
                                    request with the first line of DIR/fake.script
                                    ("STATUS CODE", e.g. "503 SlowDown"; lines are used
                                    up one per request, the last one sticks), logs each
                                    request to DIR/fake.log, writes its port to
                                    DIR/fake.port; exits when WATCH_PID is gone
  s3tool.py request METHOD URL      send one SigV4-signed request with the credentials
                                    from the environment (AWS_ACCESS_KEY_ID, ...);
                                    prints status and body, exit 0 on 2xx
  s3tool.py get URL FILE            signed GET of one object into FILE (bytes as stored)
  s3tool.py put URL FILE            signed PUT of FILE as the object (replaces it)

SigV4 is written out here because curl --user splits the access key "test:tester" at
its colon; this is a test helper, the product signs through libcurl.
"""
import datetime
import hashlib
import hmac
import http.client
import os
import pwd
import re
import socket
import sys
import time
import urllib.parse

KINDS = ('account', 'container', 'object', 'proxy')
# The credentials conf/proxy-server.conf.in gives tempauth (and start.sh writes to env).
TEST_KEY, TEST_SECRET, TEST_REGION = 'test:tester', 'testing', 'us-east-1'


def free_ports(n):
    # Bind all sockets at once so the kernel hands out n distinct ports.
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(('127.0.0.1', 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def build_ring(path, port):
    from swift.common.ring import RingBuilder
    rb = RingBuilder(8, 1, 1)
    rb.add_dev({'id': 0, 'region': 1, 'zone': 1, 'ip': '127.0.0.1', 'port': port,
                'device': 'd1', 'weight': 1})
    rb.rebalance()
    rb.save(path + '.builder')
    rb.get_ring().save(path + '.ring.gz')


def setup(srcdir, d):
    d = os.path.abspath(d)
    etc = os.path.join(d, 'etc')
    os.makedirs(etc, exist_ok=True)
    os.makedirs(os.path.join(d, 'srv', 'd1'), exist_ok=True)
    os.makedirs(os.path.join(d, 'log'), exist_ok=True)
    ports = dict(zip(('MEMCACHE_PORT',) + tuple(k.upper() + '_PORT' for k in KINDS),
                     free_ports(5)))
    subst = dict(ports, DIR=d, USER=pwd.getpwuid(os.geteuid()).pw_name)
    tdir = os.path.join(srcdir, 'tests', 's3server', 'conf')
    for name in ['swift.conf'] + [k + '-server.conf' for k in KINDS]:
        with open(os.path.join(tdir, name + '.in')) as f:
            text = f.read()
        for k, v in subst.items():
            text = text.replace('@%s@' % k, str(v))
        left = re.findall(r'@[A-Z_]+@', text)
        if left:
            raise SystemExit('s3server: %s.in: unknown placeholders %s' % (name, left))
        with open(os.path.join(etc, name), 'w') as f:
            f.write(text)
    for kind in ('account', 'container', 'object'):
        build_ring(os.path.join(etc, kind), ports[kind.upper() + '_PORT'])
    for k, v in sorted(ports.items()):
        print('%s=%d' % (k, v))
    return 0


def sign(method, url, body=b'', headers=None, key=None, secret=None,
         region=None, token=None):
    key = key or os.environ['AWS_ACCESS_KEY_ID']
    secret = secret or os.environ['AWS_SECRET_ACCESS_KEY']
    region = region or os.environ.get('AWS_REGION', 'us-east-1')
    token = token or os.environ.get('AWS_SESSION_TOKEN')
    u = urllib.parse.urlsplit(url)
    now = datetime.datetime.utcnow()
    amzdate = now.strftime('%Y%m%dT%H%M%SZ')
    day = amzdate[:8]
    h = dict((k.lower(), v) for k, v in (headers or {}).items())
    h['host'] = u.netloc
    h['x-amz-date'] = amzdate
    h['x-amz-content-sha256'] = hashlib.sha256(body).hexdigest()
    if token:
        h['x-amz-security-token'] = token
    q = urllib.parse.parse_qsl(u.query, keep_blank_values=True)
    cq = '&'.join('%s=%s' % (urllib.parse.quote(k, safe='-_.~'),
                             urllib.parse.quote(v, safe='-_.~')) for k, v in sorted(q))
    names = sorted(h)
    creq = '\n'.join([method, urllib.parse.quote(u.path or '/', safe='/-_.~'), cq,
                      ''.join('%s:%s\n' % (n, h[n].strip()) for n in names),
                      ';'.join(names), h['x-amz-content-sha256']])
    scope = '%s/%s/s3/aws4_request' % (day, region)
    sts = '\n'.join(['AWS4-HMAC-SHA256', amzdate, scope,
                     hashlib.sha256(creq.encode()).hexdigest()])
    k = ('AWS4' + secret).encode()
    for part in (day, region, 's3', 'aws4_request'):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    h['authorization'] = ('AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, '
                          'Signature=%s' % (key, scope, ';'.join(names), sig))
    return h


def request(method, url, body=b'', timeout=10, **creds):
    u = urllib.parse.urlsplit(url)
    h = sign(method, url, body, **creds)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        path = u.path or '/'
        if u.query:
            path += '?' + u.query
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def get(url, timeout=2):
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        c.request('GET', u.path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def wait(d, seconds):
    ports = {}
    with open(os.path.join(d, 'ports')) as f:
        for line in f:
            k, _, v = line.strip().partition('=')
            if k:
                ports[k] = int(v)
    pids = []
    if os.path.exists(os.path.join(d, 'pids')):
        with open(os.path.join(d, 'pids')) as f:
            pids = [int(x) for x in f.read().split()]
    deadline = time.time() + seconds
    last = 'nothing tried'
    while time.time() < deadline:
        for pid in pids:
            try:
                os.kill(pid, 0)
            except OSError:
                sys.stderr.write('s3server: process %d exited during start-up\n' % pid)
                return 3
        try:
            for kind in KINDS:
                st, _ = get('http://127.0.0.1:%d/healthcheck' % ports[kind.upper() + '_PORT'])
                if st != 200:
                    raise RuntimeError('%s healthcheck answered %d' % (kind, st))
            url = 'http://127.0.0.1:%d/' % ports['PROXY_PORT']
            st, body = request('GET', url, key=TEST_KEY, secret=TEST_SECRET,
                               region=TEST_REGION)
            if st == 200:
                return 0
            last = 'signed ListBuckets answered %d: %r' % (st, body[:200])
        except (OSError, RuntimeError, http.client.HTTPException) as e:
            last = str(e)
        time.sleep(0.1)
    sys.stderr.write('s3server: not ready after %s s: %s\n' % (seconds, last))
    return 1


def fake(d, watch):
    import http.server
    import threading
    script = os.path.join(d, 'fake.script')

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = 'HTTP/1.1'  # also answers "Expect: 100-continue"

        def answer(self):
            n = int(self.headers.get('Content-Length') or 0)
            if n:
                self.rfile.read(n)
            with open(script) as f:
                lines = [x for x in f.read().splitlines() if x.strip()]
            if len(lines) > 1:
                with open(script + '.tmp', 'w') as f:
                    f.write('\n'.join(lines[1:]) + '\n')
                os.rename(script + '.tmp', script)
            status, _, code = lines[0].partition(' ')
            with open(os.path.join(d, 'fake.log'), 'a') as f:
                f.write('%s %s -> %s\n' % (self.command, self.path, lines[0]))
            body = b''
            if not status.startswith('2'):
                body = ('<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code>'
                        '<Message>fake answer</Message></Error>' % code).encode()
            self.send_response(int(status))
            self.send_header('Content-Type', 'application/xml')
            self.send_header('Content-Length', str(len(body)))
            self.send_header('ETag', '"fake"')
            self.end_headers()
            if self.command != 'HEAD':
                self.wfile.write(body)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = answer

        def log_message(self, *args):
            pass

    def watcher():
        while True:
            try:
                os.kill(watch, 0)
            except OSError:
                os._exit(0)
            time.sleep(0.5)

    srv = http.server.HTTPServer(('127.0.0.1', 0), Handler)
    threading.Thread(target=watcher, daemon=True).start()
    port = os.path.join(d, 'fake.port')
    with open(port + '.tmp', 'w') as f:
        f.write('%d\n' % srv.server_address[1])
    os.rename(port + '.tmp', port)
    srv.serve_forever()
    return 0


def transfer(how, url, path):
    # Binary-safe object copies, for tests that damage a stored object and put it back.
    if how == 'get':
        st, body = request('GET', url)
        if 200 <= st < 300:
            with open(path, 'wb') as f:
                f.write(body)
    else:
        with open(path, 'rb') as f:
            st, body = request('PUT', url, f.read())
    if not 200 <= st < 300:
        sys.stderr.write('%s %s: %d %s\n' % (how.upper(), url, st, body[:200]))
        return 1
    return 0


def main(argv):
    if len(argv) == 4 and argv[1] == 'setup':
        return setup(argv[2], argv[3])
    if len(argv) == 4 and argv[1] == 'wait':
        return wait(argv[2], float(argv[3]))
    if len(argv) == 4 and argv[1] == 'fake':
        return fake(argv[2], int(argv[3]))
    if len(argv) == 4 and argv[1] == 'request':
        st, body = request(argv[2], argv[3])
        print(st)
        sys.stdout.write(body.decode('utf-8', 'replace'))
        return 0 if 200 <= st < 300 else 1
    if len(argv) == 4 and argv[1] in ('get', 'put'):
        return transfer(argv[1], argv[2], argv[3])
    sys.stderr.write(__doc__)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv))
