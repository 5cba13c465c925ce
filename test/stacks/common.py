# What the stack tests share (test/stacks/run.sh runs them, as the postgres
# account): the processes they start and stop, waits that poll for a state,
# a load of clients that keeps every ID acknowledged to it, the judgement of
# a refusal by its SQLSTATE and the reason snowflake_status gives, the
# checks of the IDs, and TAP: "ok N - name" per test, then "# pass N",
# "# fail N".
import atexit
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback

import psycopg2

PGBIN = os.environ.get('PGBIN', '/usr/lib/postgresql/15/bin')

# The SQLSTATEs of the node's refusals (docs/reference.md, "Refusals"): the
# node refused to generate.  Nothing else that a client sees is one.
REFUSALS = {'55S01', '55S02', '55S03', '55S04', '55S05', '55S06', '55S07', '55S08', '55S09',
            '58030', 'XX001', 'F0000', '55000'}

# The default layout: 41 bits of ms since its epoch, 10 of worker id, 12 of
# sequence.
def worker_of(i):
    return (i >> 12) & 1023


# TAP

_results = []


def ok(passed, name, detail=''):
    """One test: "ok N - name", or "not ok N - name" with DETAIL as comments."""
    _results.append(bool(passed))
    n = len(_results)
    print(f'{"ok" if passed else "not ok"} {n} - {name}', flush=True)
    if not passed and detail:
        for line in str(detail).rstrip().splitlines():
            print(f'# {line}', flush=True)
    return bool(passed)


def step(name, fn, *args, **kw):
    """A step of a scenario: ok if FN returns, not ok with its exception; the
    scenario stops at the first step that fails (Stop)."""
    try:
        fn(*args, **kw)
    except Exception:
        ok(False, name, traceback.format_exc())
        raise Stop(name)
    ok(True, name)


class Stop(Exception):
    pass


def finish():
    print(f'1..{len(_results)}')
    print(f'# pass {sum(_results)}')
    print(f'# fail {len(_results) - sum(_results)}')


def log(msg):
    print(f'# {time.strftime("%H:%M:%S")} {msg}', flush=True)


# Ports and processes

def free_port():
    """A TCP port of the loopback nobody listens on now."""
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class Procs:
    """The processes a test starts, each in a session of its own, stopped
    (TERM, then KILL) in reverse order at the end, and the PostgreSQL data
    directories whose servers it started, stopped with pg_ctl: at exit,
    also when the test fails or is sent SIGTERM or SIGINT."""

    def __init__(self):
        self.procs = []
        self.datadirs = []
        atexit.register(self.stop_all)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda s, f: sys.exit(128 + s))

    def start(self, argv, logfile, env=None):
        out = open(logfile, 'ab')
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True, env=env)
        out.close()
        self.procs.append(p)
        return p

    def datadir(self, path):
        if path not in self.datadirs:
            self.datadirs.append(path)

    def kill(self, p, sig=signal.SIGKILL):
        """Signal the session of a process this test started."""
        if p.poll() is None:
            os.killpg(p.pid, sig)
        p.wait()

    def stop_all(self):
        # one after the other, the last started first: a Patroni before
        # the etcd it keeps its state in
        for p in reversed(self.procs):
            if p.poll() is not None:
                continue
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(30)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for d in self.datadirs:
            if os.path.exists(os.path.join(d, 'postmaster.pid')):
                subprocess.run([f'{PGBIN}/pg_ctl', '-D', d, '-m', 'immediate', '-w', 'stop'],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def postmaster_pid(datadir):
    try:
        with open(os.path.join(datadir, 'postmaster.pid')) as f:
            return int(f.readline())
    except (OSError, ValueError):
        return None


def kill_postmaster(datadir):
    """What a machine that dies does to its server: the postmaster and every
    process of its group killed at once (a postmaster started in a session
    of its own leads its group)."""
    pid = postmaster_pid(datadir)
    if pid is None:
        return
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run(argv, **kw):
    """A command that must succeed; its output, or an exception with it."""
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       stdin=subprocess.DEVNULL, **kw)
    if r.returncode != 0:
        raise AssertionError(f'{" ".join(argv)} exited with {r.returncode}:\n{r.stdout}')
    return r.stdout


def wait_for(what, fn, timeout=180, interval=0.2):
    """Poll FN until it returns something true, and return that; fail
    saying WHAT after TIMEOUT seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            v = fn()
            if v:
                return v
        except Exception as e:
            last = e
        if time.monotonic() > deadline:
            raise AssertionError(f'waited {timeout} s for {what}' + (f' (last error: {last})' if last else ''))
        time.sleep(interval)


# Talking to a server

def connect(**kw):
    kw.setdefault('connect_timeout', 5)
    kw.setdefault('user', 'postgres')
    c = psycopg2.connect(**kw)
    c.autocommit = True
    return c


def query(conn, sql, params=None):
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall() if cur.description else None


def outcome(conn, sql='SELECT snowflake.snowflake_nextval()', params=None):
    """What one call gave: ('generated', rows), or the refusal as
    (SQLSTATE, reason of snowflake_status), or (SQLSTATE, None) for an
    error that is not one of the node's refusals."""
    try:
        return 'generated', query(conn, sql, params)
    except psycopg2.Error as e:
        code = e.pgcode
        if code in REFUSALS and not conn.closed:
            [(reason,)] = query(conn, 'SELECT reason FROM snowflake.snowflake_status')
            return code, reason
        return code, None


# A load of clients

class Ack:
    __slots__ = ('id', 'client', 'sent', 'acked', 'port')

    def __init__(self, id, client, sent, acked, port):
        self.id, self.client, self.sent, self.acked, self.port = id, client, sent, acked, port


class Load:
    """CLIENTS threads that write IDs into the table events of the primary
    the connection parameters find (libpq's list of hosts with
    target_session_attrs=read-write, as an application of a Patroni
    cluster connects), one statement or transaction after another: a row
    from the key's default with RETURNING, three rows, or a block of four
    IDs reserved and inserted in one transaction.  An ID is acknowledged
    when its statement or its COMMIT returned.  Every acknowledged ID is
    kept with the times its request was sent and answered (one monotonic
    clock for all), and the port of the server.  A refusal of the node is
    kept with its SQLSTATE and the reason snowflake_status gives; a server
    that is down, starting, shutting down or read-only is waited out by
    connecting again; anything else is kept as an error."""

    UNAVAILABLE = {'57P01', '57P02', '57P03', '25006'}

    def __init__(self, conninfo, clients=3, seed=42, pause=0.01):
        self.conninfo = conninfo
        self.clients = clients
        self.seed = seed
        self.pause = pause
        self.acks = []
        self.refusals = []
        self.errors = []
        self.unavailable = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads = []

    def start(self):
        for c in range(self.clients):
            t = threading.Thread(target=self._client, args=(c,), daemon=True)
            t.start()
            self.threads.append(t)

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(60)

    def _client(self, c):
        rng = random.Random(self.seed * 1000 + c)
        conn = None
        while not self.stopping.is_set():
            if conn is None:
                try:
                    conn = connect(application_name=f'load{c}', connect_timeout=2, **self.conninfo)
                except psycopg2.OperationalError:
                    with self.lock:
                        self.unavailable += 1
                    time.sleep(0.1)
                    continue
            port = conn.info.port
            op = rng.choice(('row', 'row', 'rows', 'block'))
            sent = time.monotonic()
            try:
                with conn.cursor() as cur:
                    if op == 'row':
                        cur.execute('INSERT INTO events (client) VALUES (%s) RETURNING id', (c,))
                        ids = [r[0] for r in cur.fetchall()]
                    elif op == 'rows':
                        cur.execute('INSERT INTO events (client) SELECT %s FROM generate_series(1, 3) RETURNING id',
                                    (c,))
                        ids = [r[0] for r in cur.fetchall()]
                    else:
                        cur.execute('BEGIN')
                        cur.execute('SELECT snowflake.snowflake_nextval_block(4)')
                        [(first,)] = cur.fetchall()
                        ids = [first + i for i in range(4)]
                        cur.execute('INSERT INTO events (id, client) SELECT unnest(%s::bigint[]), %s', (ids, c))
                        cur.execute('COMMIT')
                acked = time.monotonic()
                with self.lock:
                    self.acks.extend(Ack(i, c, sent, acked, port) for i in ids)
            except psycopg2.Error as e:
                code = e.pgcode
                if code in REFUSALS:
                    reason = None
                    try:
                        conn.rollback() if not conn.autocommit else query(conn, 'ROLLBACK')
                        [(reason,)] = query(conn, 'SELECT reason FROM snowflake.snowflake_status')
                    except psycopg2.Error:
                        pass
                    with self.lock:
                        self.refusals.append((code, reason, port, op, time.monotonic()))
                elif code is None or code[:2] == '08' or code in self.UNAVAILABLE:
                    with self.lock:
                        self.unavailable += 1
                else:
                    with self.lock:
                        self.errors.append((code, str(e).strip(), port, op))
                try:
                    conn.close()
                except psycopg2.Error:
                    pass
                conn = None
                continue
            if self.pause:
                time.sleep(self.pause)
        if conn is not None:
            conn.close()

    def count(self, pred=lambda a: True):
        with self.lock:
            return sum(1 for a in self.acks if pred(a))

    def wait_acks(self, what, n, pred, timeout=180):
        """Wait until N more IDs matching PRED are acknowledged than now."""
        base = self.count(pred)
        wait_for(f'{n} IDs acknowledged {what}', lambda: self.count(pred) >= base + n or self._dead(), timeout)
        if self._dead():
            raise AssertionError(f'the load stopped: refusals {self.refusals[:5]}, errors {self.errors[:5]}')

    def _dead(self):
        return bool(self.refusals or self.errors)


def check_ids(acks, per_worker=True):
    """The IDs acknowledged, checked: none twice, and none at or below an
    ID acknowledged before its request was sent (of the same worker id if
    PER_WORKER).  Returns a list of what is wrong (empty if nothing)."""
    wrong = []
    seen = {}
    for a in acks:
        if a.id in seen:
            b = seen[a.id]
            wrong.append(f'ID {a.id} acknowledged twice: to client {b.client} by port {b.port} '
                         f'and to client {a.client} by port {a.port}')
        else:
            seen[a.id] = a
    groups = {}
    for a in acks:
        groups.setdefault(worker_of(a.id) if per_worker else 0, []).append(a)
    for g, group in groups.items():
        by_ack = sorted(group, key=lambda a: a.acked)
        by_sent = sorted(group, key=lambda a: a.sent)
        i = 0
        top = None
        for a in by_sent:
            while i < len(by_ack) and by_ack[i].acked < a.sent:
                if top is None or by_ack[i].id > top.id:
                    top = by_ack[i]
                i += 1
            if top is not None and a.id <= top.id:
                wrong.append(f'ID {a.id} (port {a.port}, client {a.client}) is at or below ID {top.id} '
                             f'(port {top.port}) acknowledged {a.sent - top.acked:.3f} s before it was asked for')
    return wrong


def write_acks(path, acks):
    with open(path, 'w') as f:
        for a in acks:
            f.write(f'{a.id}\t{worker_of(a.id)}\t{a.client}\t{a.port}\t{a.sent:.6f}\t{a.acked:.6f}\n')
