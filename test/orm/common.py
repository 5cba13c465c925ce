# What the Python ORM tests share, as common.mjs for the JavaScript ones:
# the search_path README recommends for an application's sessions, the
# checks every key must pass, and TAP: "ok N - name" per test, then
# "# pass N", "# fail N".
import textwrap
import traceback

APP_SEARCH_PATH = '"$user", public'
# the default layout: 41 bits of ms since 2016-11-01, 10 bits of worker id,
# 12 bits of sequence
EPOCH_MS = 1477958400000
# what exact_key() asks the server, with the key as %(id)s
HELD_SQL = 'SELECT id::text FROM {table} WHERE id = %(id)s'
DECODED_SQL = '''SELECT (extract(epoch FROM ts) * 1000)::bigint, worker_id, seq
    FROM snowflake.snowflake_decode(%(id)s)'''

tests = []


def test(fn):
    tests.append(fn)
    return fn


def assert_exact_key(key, table, query):
    """An int, what the server holds (compared as text), above 2^53, and
    decoded alike in the client and the server, with the node's worker id.
    query(sql, params) runs sql (pyformat) and returns its rows."""
    assert type(key) is int, type(key)
    assert key > 2**53, key
    held = [r[0] for r in query(HELD_SQL.format(table=table), {'id': key})]
    assert held == [str(key)], (held, key)
    [(ms, worker, seq)] = query(DECODED_SQL, {'id': key})
    assert ((key >> 22) + EPOCH_MS, (key >> 12) & 1023, key & 4095) == (ms, worker, seq)
    assert worker == 7


def assert_block(first, lines, query):
    """README's block recipe: orders first and first + 1 from one block,
    lines [(id, order_id, item, name)] in key order, A's two and B's one,
    each keyed after the block."""
    assert_exact_key(first, 'orders', query)
    assert_exact_key(first + 1, 'orders', query)
    assert [line[1:] for line in lines] == \
        [(first, 'order A', 'line 1'), (first, 'order A', 'line 2'), (first + 1, 'order B', 'line 1')]
    for line in lines:
        assert_exact_key(line[0], 'order_lines', query)
        assert line[0] > first + 1


def run():
    passed = failed = 0
    for n, fn in enumerate(tests, 1):
        try:
            fn()
            passed += 1
            print(f'ok {n} - {fn.__doc__}')
        except Exception:
            failed += 1
            print(f'not ok {n} - {fn.__doc__}')
            print(textwrap.indent(traceback.format_exc(), '# '), end='')
    print(f'1..{len(tests)}')
    print(f'# pass {passed}')
    print(f'# fail {failed}')
