"""Writes a TDSQL-style (TencentDB for MariaDB / TDSQL subscription) message set.

Three hand-written DML messages (an insert into shop.users, an update of it, a delete from
shop.orders), shaped like the samples in the TDSQL subscription docs (docs/formats and
shared/spec/formats.md, "tdsql-json") plus the extra keys real messages carry, repeated
with varying values. Output: DIR/values.bin, each message a u32 little-endian length then
the bytes (the same layout as `cdc-decode generate`).

    python3 gen_tdsql.py [--messages 20000] [--seed 1] [--out /tmp/jc/tdsql-json]
"""

import argparse
import json
import os
import random
import struct

NAMES = ["alice", "bob", "carol", "dave", "O\\'Brien", "李雷", "韩梅梅", "Zoë", "Renée \"Rae\""]
CITIES = ["北京市朝阳区", "上海市浦东新区", "Shenzhen Nanshan", "广州市天河区", "Hangzhou"]
STATUSES = ["paid", "shipped", "cancelled", "refunded"]


def sql_str(text):
    return "'" + text + "'"


def users_image(rng, uid):
    name = rng.choice(NAMES)
    note = rng.choice(["'##isnull##'", sql_str("vip since 20%02d" % rng.randint(10, 24)),
                       sql_str("line1\\nline2")])
    flags = rng.randint(-60000, 60000)
    flags_text = "%d (%d)" % (flags, flags + 2**64) if flags < 0 else str(flags)
    return [
        str(uid),
        sql_str("%s_%02d" % (name, uid % 100)),
        sql_str("user%d@example.com" % uid),
        str(rng.randint(18, 90)),
        "%d.%02d" % (rng.randint(0, 99999), rng.randint(0, 99)),
        sql_str("2024-%02d-%02d %02d:%02d:%02d" % (rng.randint(1, 12), rng.randint(1, 28),
                                                   rng.randint(0, 23), rng.randint(0, 59),
                                                   rng.randint(0, 59))),
        note,
        sql_str(rng.choice(CITIES)),
        flags_text,
    ]


def orders_image(rng, oid):
    return [
        str(oid),
        str(rng.randint(1, 500000)),
        "%d.%02d" % (rng.randint(1, 99999), rng.randint(0, 99)),
        sql_str("CNY"),
        str(rng.randint(1, 20)),
        sql_str(rng.choice(STATUSES)),
        sql_str("2024-05-%02d %02d:%02d:%02d.%06d" % (rng.randint(1, 28), rng.randint(0, 23),
                                                      rng.randint(0, 59), rng.randint(0, 59),
                                                      rng.randint(0, 999999))),
        "'##isnull##'",
    ]


def message(rng, n):
    kind = ("insert", "update", "delete")[n % 3]
    code = {"insert": 30, "update": 31, "delete": 32}[kind]
    table = "orders" if kind == "delete" else "users"
    trx = 469 + n // 3
    msg = {
        "logtype": "mysqlbinlog",
        "eventtype": code,
        "eventtypestr": kind,
        "db": "shop",
        "table": table,
        "localip": "10.231.23.241",
        "localport": 8810,
        "begintime": 1714550402 + n // 3,
        "gtid": "35be190b-d019-11e7-ab7a-a0423f32c225:%d" % trx,
        "event_index": str(2 + n % 3),
        "prefix": "set_1714550002_3",
        "filename": "binlog.%06d" % (123 + n // 5000),
        "serverid": "2670193178",
        "gtid_commitid": "%d" % (88000000 + trx),
        "gtid_flag2": "0",
        "sub_event_index": "0",
        "sequence_num": str(1000000 + n),
        "orgoffset": str(4 + 731 * n),
    }
    if kind == "insert":
        msg["where"] = []
        msg["field"] = users_image(rng, 100000 + n)
    elif kind == "update":
        uid = 100000 + rng.randrange(max(n, 1))
        msg["where"] = users_image(rng, uid)
        msg["field"] = users_image(rng, uid)
    else:
        msg["where"] = orders_image(rng, 900000 + n)
        msg["field"] = []
    return json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default="/tmp/jc/tdsql-json")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    os.makedirs(args.out, exist_ok=True)
    total = 0
    with open(os.path.join(args.out, "values.bin"), "wb") as out:
        for n in range(args.messages):
            body = message(rng, n)
            total += len(body)
            out.write(struct.pack("<I", len(body)))
            out.write(body)
    print("tdsql-json: %d messages, %d bytes (%d bytes/message) -> %s"
          % (args.messages, total, total // args.messages, args.out))


if __name__ == "__main__":
    main()
