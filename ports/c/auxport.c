/*
 * auxport: the auxiliary-output store in C11, speaking the JSON-lines port
 * protocol of docs/protocol.md on stdin/stdout, with the `strict` semantics of
 * spec/auxspec/models/sequential.py (docs/semantics.md teaches it).
 *
 * One request line in, one response line out (with --batch, a line may also
 * be a message: an array of requests, answered by an array in one line). A line that is not a request of
 * the protocol (bad JSON, unknown op, a field of the wrong shape, an op before
 * any store) is reported on stderr and ends the process with status 3, as
 * `auxspec serve` does; running out of memory ends it with status 4.
 *
 * The store is a hash table of key records; stored records are also on a
 * doubly linked recency list (least recent at the head). A put first decides,
 * without changing anything, whether it succeeds and what it evicts; only then
 * does it apply, so a failed put leaves the store exactly as it was.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_MALFORMED 3
#define EXIT_NOMEM 4
#define MAX_DEPTH 64

/* ------------------------------------------------------------------ basics */

static long g_line;

static void die(int status, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "auxport: request line %ld: ", g_line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(status);
}

#define malformed(...) die(EXIT_MALFORMED, __VA_ARGS__)

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) die(EXIT_NOMEM, "out of memory");
    return p;
}

static void *xrealloc(void *p, size_t n) {
    p = realloc(p, n ? n : 1);
    if (!p) die(EXIT_NOMEM, "out of memory");
    return p;
}

/* Growable array of `size`-byte items. */
static void grow(void **items, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return;
    size_t next = *cap ? *cap * 2 : 8;
    while (next < need) next *= 2;
    if (next > SIZE_MAX / size) die(EXIT_NOMEM, "out of memory");
    *items = xrealloc(*items, next * size);
    *cap = next;
}

typedef struct {
    char *d;
    size_t n, cap;
} Buf;

static void buf_put(Buf *b, const char *s, size_t n) {
    grow((void **)&b->d, &b->cap, b->n + n + 1, 1);
    memcpy(b->d + b->n, s, n);
    b->n += n;
    b->d[b->n] = '\0';
}

static void buf_str(Buf *b, const char *s) { buf_put(b, s, strlen(s)); }

static void buf_fmt(Buf *b, const char *fmt, ...) {
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    buf_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static void buf_hex(Buf *b, const unsigned char *p, size_t n) {
    static const char digits[] = "0123456789abcdef";
    grow((void **)&b->d, &b->cap, b->n + 2 * n + 1, 1);
    for (size_t i = 0; i < n; i++) {
        b->d[b->n++] = digits[p[i] >> 4];
        b->d[b->n++] = digits[p[i] & 15];
    }
    b->d[b->n] = '\0';
}

/* A JSON string from stored key bytes. Keys are kept as WTF-8 (UTF-8 that may
 * hold lone surrogates, which JSON's \u escapes can name), so byte order is
 * code point order, as Python sorts str. Everything outside printable ASCII
 * goes out as \u escapes, which any JSON reader maps back to the same key. */
static void buf_json_string(Buf *b, const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    buf_put(b, "\"", 1);
    for (size_t i = 0; i < n;) {
        uint32_t c = p[i];
        size_t len = 1;
        if (c >= 0xF0) {
            c = ((c & 0x07) << 18) | ((uint32_t)(p[i + 1] & 0x3F) << 12) | ((uint32_t)(p[i + 2] & 0x3F) << 6) |
                (p[i + 3] & 0x3F);
            len = 4;
        } else if (c >= 0xE0) {
            c = ((c & 0x0F) << 12) | ((uint32_t)(p[i + 1] & 0x3F) << 6) | (p[i + 2] & 0x3F);
            len = 3;
        } else if (c >= 0xC0) {
            c = ((c & 0x1F) << 6) | (p[i + 1] & 0x3F);
            len = 2;
        }
        i += len;
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            buf_put(b, esc, 2);
        } else if (c >= 0x20 && c < 0x7F) {
            char ch = (char)c;
            buf_put(b, &ch, 1);
        } else if (c < 0x10000) {
            buf_fmt(b, "\\u%04x", (unsigned)c);
        } else {
            c -= 0x10000;
            buf_fmt(b, "\\u%04x\\u%04x", (unsigned)(0xD800 + (c >> 10)), (unsigned)(0xDC00 + (c & 0x3FF)));
        }
    }
    buf_put(b, "\"", 1);
}

/* ------------------------------------------------------------- JSON reader */

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } JType;

typedef struct JVal JVal;
typedef struct JMember JMember;

struct JVal {
    JType type;
    bool b;       /* J_BOOL */
    bool is_int;  /* J_NUM: an integer literal (Python's json gives an int) */
    char *s;      /* J_STR: decoded WTF-8 bytes; J_NUM: the literal */
    size_t slen;
    JVal *items;  /* J_ARR */
    JMember *members; /* J_OBJ */
    size_t n;
};

struct JMember {
    char *name;
    size_t nlen;
    JVal val;
};

typedef struct {
    const char *p, *end;
} Parser;

static void json_free(JVal *v) {
    free(v->s);
    for (size_t i = 0; v->type == J_ARR && i < v->n; i++) json_free(&v->items[i]);
    for (size_t i = 0; v->type == J_OBJ && i < v->n; i++) {
        free(v->members[i].name);
        json_free(&v->members[i].val);
    }
    free(v->items);
    free(v->members);
    memset(v, 0, sizeof *v);
}

static void skip_ws(Parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) ps->p++;
}

static bool literal(Parser *ps, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) >= n && memcmp(ps->p, word, n) == 0) {
        ps->p += n;
        return true;
    }
    return false;
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool read_u4(Parser *ps, uint32_t *out) {
    if (ps->end - ps->p < 4) return false;
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval((unsigned char)ps->p[i]);
        if (h < 0) return false;
        v = v * 16 + (uint32_t)h;
    }
    ps->p += 4;
    *out = v;
    return true;
}

static void put_utf8(Buf *b, uint32_t c) {
    char out[4];
    size_t n;
    if (c < 0x80) {
        out[0] = (char)c;
        n = 1;
    } else if (c < 0x800) {
        out[0] = (char)(0xC0 | (c >> 6));
        out[1] = (char)(0x80 | (c & 0x3F));
        n = 2;
    } else if (c < 0x10000) {
        out[0] = (char)(0xE0 | (c >> 12));
        out[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        out[2] = (char)(0x80 | (c & 0x3F));
        n = 3;
    } else {
        out[0] = (char)(0xF0 | (c >> 18));
        out[1] = (char)(0x80 | ((c >> 12) & 0x3F));
        out[2] = (char)(0x80 | ((c >> 6) & 0x3F));
        out[3] = (char)(0x80 | (c & 0x3F));
        n = 4;
    }
    buf_put(b, out, n);
}

/* Length of a well-formed UTF-8 sequence at p (no surrogates, no overlongs), or 0. */
static size_t utf8_len(const unsigned char *p, const unsigned char *end) {
    size_t n;
    uint32_t c, min;
    if (p[0] < 0x80) return 1;
    if (p[0] >= 0xC2 && p[0] <= 0xDF) n = 2, c = p[0] & 0x1F, min = 0x80;
    else if (p[0] >= 0xE0 && p[0] <= 0xEF) n = 3, c = p[0] & 0x0F, min = 0x800;
    else if (p[0] >= 0xF0 && p[0] <= 0xF4) n = 4, c = p[0] & 0x07, min = 0x10000;
    else return 0;
    if ((size_t)(end - p) < n) return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        c = (c << 6) | (p[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    return n;
}

/* The string at ps->p (just past the opening quote), decoded as Python's json does. */
static bool parse_string(Parser *ps, char **out, size_t *outlen) {
    Buf b = {0};
    buf_put(&b, "", 0);
    for (;;) {
        if (ps->p >= ps->end) goto fail;
        unsigned char c = (unsigned char)*ps->p;
        if (c == '"') {
            ps->p++;
            break;
        }
        if (c < 0x20) goto fail; /* control characters must be escaped */
        if (c < 0x80 && c != '\\') { /* a run of plain ASCII (a payload's hex is one): one copy */
            const char *run = ps->p;
            while (ps->p < ps->end && (unsigned char)*ps->p >= 0x20 && (unsigned char)*ps->p < 0x80 &&
                   *ps->p != '"' && *ps->p != '\\')
                ps->p++;
            buf_put(&b, run, (size_t)(ps->p - run));
            continue;
        }
        if (c != '\\') {
            size_t n = utf8_len((const unsigned char *)ps->p, (const unsigned char *)ps->end);
            if (!n) goto fail;
            buf_put(&b, ps->p, n);
            ps->p += n;
            continue;
        }
        ps->p++;
        if (ps->p >= ps->end) goto fail;
        char e = *ps->p++;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            static const char map[] = "\"\\/\b\f\n\r\t";
            buf_put(&b, &map[simple - "\"\\/bfnrt"], 1);
            continue;
        }
        if (e != 'u') goto fail;
        uint32_t u;
        if (!read_u4(ps, &u)) goto fail;
        /* A high surrogate followed by an escaped low one is one code point;
         * any other surrogate stays a lone one, as in Python. */
        if (u >= 0xD800 && u <= 0xDBFF && ps->end - ps->p >= 6 && ps->p[0] == '\\' && ps->p[1] == 'u') {
            Parser look = {ps->p + 2, ps->end};
            uint32_t low;
            if (read_u4(&look, &low) && low >= 0xDC00 && low <= 0xDFFF) {
                u = 0x10000 + ((u - 0xD800) << 10) + (low - 0xDC00);
                ps->p = look.p;
            }
        }
        put_utf8(&b, u);
    }
    *out = b.d;
    *outlen = b.n;
    return true;
fail:
    free(b.d);
    return false;
}

static bool parse_value(Parser *ps, JVal *v, int depth);

static bool parse_number(Parser *ps, JVal *v) {
    const char *start = ps->p;
    bool is_int = true;
    if (literal(ps, "NaN") || literal(ps, "Infinity") || literal(ps, "-Infinity")) {
        is_int = false; /* Python's json reads these as floats */
    } else {
        if (ps->p < ps->end && *ps->p == '-') ps->p++;
        if (ps->p >= ps->end) return false;
        if (*ps->p == '0') {
            ps->p++;
        } else if (*ps->p >= '1' && *ps->p <= '9') {
            while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
        } else {
            return false;
        }
        if (ps->p < ps->end && *ps->p == '.') {
            is_int = false;
            ps->p++;
            const char *digits = ps->p;
            while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
            if (ps->p == digits) return false;
        }
        if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
            is_int = false;
            ps->p++;
            if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-')) ps->p++;
            const char *digits = ps->p;
            while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
            if (ps->p == digits) return false;
        }
    }
    v->type = J_NUM;
    v->is_int = is_int;
    v->slen = (size_t)(ps->p - start);
    v->s = xmalloc(v->slen + 1);
    memcpy(v->s, start, v->slen);
    v->s[v->slen] = '\0';
    return true;
}

static bool parse_array(Parser *ps, JVal *v, int depth) {
    size_t cap = 0;
    v->type = J_ARR;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ']') {
        ps->p++;
        return true;
    }
    for (;;) {
        grow((void **)&v->items, &cap, v->n + 1, sizeof *v->items);
        memset(&v->items[v->n], 0, sizeof *v->items);
        v->n++;
        if (!parse_value(ps, &v->items[v->n - 1], depth + 1)) return false;
        skip_ws(ps);
        if (ps->p >= ps->end) return false;
        char c = *ps->p++;
        if (c == ']') return true;
        if (c != ',') return false;
    }
}

static bool parse_object(Parser *ps, JVal *v, int depth) {
    size_t cap = 0;
    v->type = J_OBJ;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
        return true;
    }
    for (;;) {
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != '"') return false;
        ps->p++;
        grow((void **)&v->members, &cap, v->n + 1, sizeof *v->members);
        JMember *m = &v->members[v->n];
        memset(m, 0, sizeof *m);
        v->n++;
        if (!parse_string(ps, &m->name, &m->nlen)) return false;
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != ':') return false;
        ps->p++;
        if (!parse_value(ps, &m->val, depth + 1)) return false;
        skip_ws(ps);
        if (ps->p >= ps->end) return false;
        char c = *ps->p++;
        if (c == '}') return true;
        if (c != ',') return false;
    }
}

static bool parse_value(Parser *ps, JVal *v, int depth) {
    if (depth > MAX_DEPTH) return false;
    skip_ws(ps);
    if (ps->p >= ps->end) return false;
    char c = *ps->p;
    if (c == '"') {
        ps->p++;
        v->type = J_STR;
        return parse_string(ps, &v->s, &v->slen);
    }
    if (c == '[') {
        ps->p++;
        return parse_array(ps, v, depth);
    }
    if (c == '{') {
        ps->p++;
        return parse_object(ps, v, depth);
    }
    if (literal(ps, "null")) {
        v->type = J_NULL;
        return true;
    }
    if (literal(ps, "true") || literal(ps, "false")) {
        v->type = J_BOOL;
        v->b = c == 't';
        return true;
    }
    return parse_number(ps, v);
}

/* A member of an object; the last one wins when a name repeats, as in Python. */
static JVal *member(JVal *obj, const char *name) {
    size_t n = strlen(name);
    for (size_t i = obj->n; i-- > 0;) {
        if (obj->members[i].nlen == n && memcmp(obj->members[i].name, name, n) == 0) return &obj->members[i].val;
    }
    return NULL;
}

/* --------------------------------------------------------------- big sizes */

/* A JSON integer literal, read exactly: sizes may be any Python int. */
typedef struct {
    bool neg;          /* strictly below zero */
    const char *digits; /* without sign or leading zeros; "" for zero */
    size_t ndigits;
} BigInt;

static BigInt big_from(const JVal *v) {
    BigInt x = {false, v->s, v->slen};
    if (x.ndigits && x.digits[0] == '-') x.neg = true, x.digits++, x.ndigits--;
    while (x.ndigits && x.digits[0] == '0') x.digits++, x.ndigits--;
    if (!x.ndigits) x.neg = false; /* -0 is 0 */
    return x;
}

static int big_cmp(BigInt a, BigInt b) {
    if (a.neg != b.neg) return a.neg ? -1 : 1;
    int sign = a.neg ? -1 : 1;
    if (a.ndigits != b.ndigits) return a.ndigits < b.ndigits ? -sign : sign;
    int c = memcmp(a.digits, b.digits, a.ndigits);
    return c < 0 ? -sign : c > 0 ? sign : 0;
}

/* A non-negative value, saturated at SIZE_MAX. */
static size_t big_to_size(BigInt x) {
    size_t v = 0;
    for (size_t i = 0; i < x.ndigits; i++) {
        size_t d = (size_t)(x.digits[i] - '0');
        if (v > (SIZE_MAX - d) / 10) return SIZE_MAX;
        v = v * 10 + d;
    }
    return v;
}

/* ------------------------------------------------------------------- store */

typedef struct Rec Rec;
struct Rec {
    char *key;
    size_t klen;
    uint64_t hash;
    Rec *chain;          /* next in the hash bucket */
    Rec *prev, *next;    /* recency list, while stored */
    bool stored;
    unsigned char *payload;
    int64_t count;       /* references; a record exists while stored or count > 0 */
    /* Scratch for one put; reset before it returns. */
    bool touched, in_batch, terminal, victim;
    int64_t delta;
    const unsigned char *batch_payload;
};

typedef struct {
    bool exists, closed;
    size_t capacity, nbytes;
    Rec **buckets;
    size_t nbuckets, nrecs;
    Rec *head, *tail; /* least and most recent stored records */
    size_t nstored;
} Store;

static Store g_store;

static uint64_t hash_key(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h;
}

static Rec *lookup(const char *key, size_t klen) {
    if (!g_store.nbuckets) return NULL;
    uint64_t h = hash_key(key, klen);
    for (Rec *r = g_store.buckets[h % g_store.nbuckets]; r; r = r->chain) {
        if (r->hash == h && r->klen == klen && memcmp(r->key, key, klen) == 0) return r;
    }
    return NULL;
}

static void rehash(size_t nbuckets) {
    Rec **fresh = xmalloc(nbuckets * sizeof *fresh);
    memset(fresh, 0, nbuckets * sizeof *fresh);
    for (size_t i = 0; i < g_store.nbuckets; i++) {
        for (Rec *r = g_store.buckets[i], *next; r; r = next) {
            next = r->chain;
            r->chain = fresh[r->hash % nbuckets];
            fresh[r->hash % nbuckets] = r;
        }
    }
    free(g_store.buckets);
    g_store.buckets = fresh;
    g_store.nbuckets = nbuckets;
}

static Rec *lookup_or_add(const char *key, size_t klen) {
    Rec *r = lookup(key, klen);
    if (r) return r;
    if (g_store.nrecs + 1 > g_store.nbuckets) rehash(g_store.nbuckets ? g_store.nbuckets * 2 : 64);
    r = xmalloc(sizeof *r);
    memset(r, 0, sizeof *r);
    r->key = xmalloc(klen ? klen : 1);
    memcpy(r->key, key, klen);
    r->klen = klen;
    r->hash = hash_key(key, klen);
    Rec **bucket = &g_store.buckets[r->hash % g_store.nbuckets];
    r->chain = *bucket;
    *bucket = r;
    g_store.nrecs++;
    return r;
}

static void rec_free(Rec *r) {
    free(r->key);
    free(r->payload);
    free(r);
}

/* Drop a record that is neither stored nor referenced. */
static void forget_if_unused(Rec *r) {
    if (r->stored || r->count > 0) return;
    Rec **link = &g_store.buckets[r->hash % g_store.nbuckets];
    while (*link != r) link = &(*link)->chain;
    *link = r->chain;
    g_store.nrecs--;
    rec_free(r);
}

static void unlink_rec(Rec *r) {
    if (r->prev) r->prev->next = r->next;
    else g_store.head = r->next;
    if (r->next) r->next->prev = r->prev;
    else g_store.tail = r->prev;
    r->prev = r->next = NULL;
}

static void append_rec(Rec *r) {
    r->prev = g_store.tail;
    r->next = NULL;
    if (g_store.tail) g_store.tail->next = r;
    else g_store.head = r;
    g_store.tail = r;
}

static void make_most_recent(Rec *r) {
    if (g_store.tail == r) return;
    unlink_rec(r);
    append_rec(r);
}

static void store_drop(void) {
    for (size_t i = 0; i < g_store.nbuckets; i++) {
        for (Rec *r = g_store.buckets[i], *next; r; r = next) {
            next = r->chain;
            rec_free(r);
        }
    }
    free(g_store.buckets);
    memset(&g_store, 0, sizeof g_store);
}

/* ---------------------------------------------------------------- requests */

typedef enum {
    OK_NULL, /* {"ok": null} */
    OK_DATA, /* {"ok": "<hex>"} */
    ERR_CLOSED,
    ERR_CAPACITY,
    ERR_MISSING,
    ERR_UNREFERENCED,
    ERR_PAYLOAD,
    ERR_TYPE,
    ERR_BUFFER,
    ERR_CONFIG,
} Outcome;

static const char *const KIND_NAME[] = {
    [ERR_CLOSED] = "closed",   [ERR_CAPACITY] = "capacity", [ERR_MISSING] = "missing",
    [ERR_UNREFERENCED] = "unreferenced", [ERR_PAYLOAD] = "payload", [ERR_TYPE] = "type",
    [ERR_BUFFER] = "buffer",   [ERR_CONFIG] = "config",
};

static const char *const KIND_MESSAGE[] = {
    [ERR_CLOSED] = "store is closed",
    [ERR_CAPACITY] = "cannot fit the batch: too few unreferenced, unprotected keys to evict",
    [ERR_MISSING] = "a key read is not stored",
    [ERR_UNREFERENCED] = "release of a key that holds no reference",
    [ERR_PAYLOAD] = "payload length differs from object_nbytes",
    [ERR_TYPE] = "keys must be strings, payloads bytes, buffers writable, sizes integers",
    [ERR_BUFFER] = "buffer is smaller than the objects read",
    [ERR_CONFIG] = "need object_nbytes > 0 and max_bytes >= object_nbytes",
};

/* A key or payload as the request gives it: `valid` is false for a key that is
 * a JSON integer or a payload that is null. Payload bytes are decoded hex. */
typedef struct {
    bool valid;
    const char *s;
    size_t len;
} Arg;

typedef struct {
    Arg *v;
    size_t n;
} ArgList;

typedef struct {
    Arg key, payload;
} Obj;

/* A key list field (`keys`, `retain`, `release`), shaped as ops.op_from_json
 * accepts it: a list of strings or integers. */
static ArgList key_list(JVal *req, const char *name, bool required) {
    ArgList out = {0};
    JVal *v = member(req, name);
    if (!v) {
        if (required) malformed("\"%s\" is required", name);
        return out;
    }
    if (v->type != J_ARR) malformed("\"%s\" must be a list", name);
    out.v = xmalloc(v->n * sizeof *out.v);
    out.n = v->n;
    for (size_t i = 0; i < v->n; i++) {
        JVal *k = &v->items[i];
        if (k->type == J_STR) out.v[i] = (Arg){true, k->s, k->slen};
        else if (k->type == J_NUM && k->is_int) out.v[i] = (Arg){false, NULL, 0};
        else malformed("a key must be a string or an integer");
    }
    return out;
}

/* bytes.fromhex: pairs of hex digits, ASCII whitespace allowed between pairs. */
static unsigned char *from_hex(const char *s, size_t n, size_t *outlen) {
    unsigned char *out = xmalloc(n / 2 + 1);
    size_t len = 0;
    for (size_t i = 0; i < n;) {
        int hi = hexval((unsigned char)s[i]);
        if (hi < 0 && s[i] && strchr(" \t\n\r\f\v", s[i])) { /* looked for only where no digit is */
            i++;
            continue;
        }
        int lo = i + 1 < n ? hexval((unsigned char)s[i + 1]) : -1;
        if (hi < 0 || lo < 0) {
            free(out);
            return NULL;
        }
        out[len++] = (unsigned char)(hi * 16 + lo);
        i += 2;
    }
    *outlen = len;
    return out;
}

/* --- put */

static Outcome validate_put(const Obj *objs, size_t nobjs, const ArgList *retain, const ArgList *release) {
    for (size_t i = 0; i < nobjs; i++) {
        if (!objs[i].key.valid || !objs[i].payload.valid) return ERR_TYPE;
        if (objs[i].payload.len != g_store.nbytes) return ERR_PAYLOAD;
    }
    for (size_t i = 0; i < retain->n; i++)
        if (!retain->v[i].valid) return ERR_TYPE;
    for (size_t i = 0; i < release->n; i++)
        if (!release->v[i].valid) return ERR_TYPE;
    return OK_NULL;
}

typedef struct {
    Rec **v;
    size_t n, cap;
} RecList;

static void reclist_add(RecList *l, Rec *r) {
    grow((void **)&l->v, &l->cap, l->n + 1, sizeof *l->v);
    l->v[l->n++] = r;
}

static Rec *touch(RecList *touched, const Arg *key) {
    Rec *r = lookup_or_add(key->s, key->len);
    if (!r->touched) {
        r->touched = true;
        reclist_add(touched, r);
    }
    return r;
}

static Outcome do_put(const Obj *objs, size_t nobjs, const ArgList *retain, const ArgList *release) {
    if (g_store.closed) return ERR_CLOSED;
    Outcome valid = validate_put(objs, nobjs, retain, release);
    if (valid != OK_NULL) return valid;

    RecList touched = {0}, terminal = {0}, batch = {0}, victims = {0};
    Outcome result = OK_NULL;

    /* Step 1, decided without applying: retains then releases, in order. */
    for (size_t i = 0; i < retain->n; i++) touch(&touched, &retain->v[i])->delta++;
    for (size_t i = 0; i < release->n; i++) {
        Rec *r = touch(&touched, &release->v[i]);
        r->delta--;
        int64_t now = r->count + r->delta;
        if (now < 0) {
            result = ERR_UNREFERENCED;
            goto cleanup;
        }
        if (now == 0) {
            r->terminal = true;
            reclist_add(&terminal, r);
        }
    }
    /* Step 2's batch as a dict: first position, last payload. */
    size_t inserted = 0;
    for (size_t i = 0; i < nobjs; i++) {
        Rec *r = touch(&touched, &objs[i].key);
        if (!r->in_batch) {
            r->in_batch = true;
            reclist_add(&batch, r);
            inserted += !r->stored;
        }
        r->batch_payload = (const unsigned char *)objs[i].payload.s;
    }
    /* Step 4's victims in the order the store would have after steps 2-3:
     * untouched-by-the-batch stored keys as they are, then the batch
     * (protected unless terminal), then the terminal keys, whose final count
     * is zero. */
    size_t total = g_store.nstored + inserted;
    size_t excess = total > g_store.capacity ? total - g_store.capacity : 0;
    for (Rec *r = g_store.head; r && victims.n < excess; r = r->next) {
        if (r->in_batch || r->terminal || r->count + r->delta > 0) continue;
        r->victim = true;
        if (!r->touched) {
            r->touched = true;
            reclist_add(&touched, r);
        }
        reclist_add(&victims, r);
    }
    for (size_t i = 0; i < terminal.n && victims.n < excess; i++) {
        Rec *r = terminal.v[i];
        if (r->stored || r->in_batch) {
            r->victim = true;
            reclist_add(&victims, r);
        }
    }
    if (victims.n < excess) {
        result = ERR_CAPACITY;
        goto cleanup;
    }

    /* Apply: counts, the batch, terminal moves, evictions. */
    for (size_t i = 0; i < touched.n; i++) touched.v[i]->count += touched.v[i]->delta;
    for (size_t i = 0; i < batch.n; i++) {
        Rec *r = batch.v[i];
        if (r->stored) {
            make_most_recent(r); /* first write wins: the payload stays */
        } else {
            r->payload = xmalloc(g_store.nbytes);
            memcpy(r->payload, r->batch_payload, g_store.nbytes);
            r->stored = true;
            append_rec(r);
            g_store.nstored++;
        }
    }
    for (size_t i = 0; i < terminal.n; i++)
        if (terminal.v[i]->stored) make_most_recent(terminal.v[i]);
    for (size_t i = 0; i < victims.n; i++) {
        Rec *r = victims.v[i];
        unlink_rec(r);
        r->stored = false;
        free(r->payload);
        r->payload = NULL;
        g_store.nstored--;
    }

cleanup:
    for (size_t i = 0; i < touched.n; i++) {
        Rec *r = touched.v[i];
        r->touched = r->in_batch = r->terminal = r->victim = false;
        r->delta = 0;
        r->batch_payload = NULL;
        forget_if_unused(r);
    }
    free(touched.v);
    free(terminal.v);
    free(batch.v);
    free(victims.v);
    return result;
}

/* --- reads */

/* get (buffer == NULL) or read_into (a buffer of *buffer bytes; `readonly`). */
static Outcome do_read(const ArgList *keys, const size_t *buffer, bool readonly, Buf *data) {
    if (g_store.closed) return ERR_CLOSED;
    for (size_t i = 0; i < keys->n; i++)
        if (!keys->v[i].valid) return ERR_TYPE;
    if (buffer && readonly) return ERR_TYPE;
    Rec **found = xmalloc(keys->n * sizeof *found);
    for (size_t i = 0; i < keys->n; i++) {
        found[i] = lookup(keys->v[i].s, keys->v[i].len);
        if (!found[i] || !found[i]->stored) {
            free(found);
            return ERR_MISSING;
        }
    }
    /* keys->n * nbytes, without overflow: compared with the buffer first. */
    if (buffer && g_store.nbytes && keys->n > *buffer / g_store.nbytes) {
        free(found);
        return ERR_BUFFER;
    }
    for (size_t i = 0; i < keys->n; i++) buf_hex(data, found[i]->payload, g_store.nbytes);
    for (size_t i = 0; i < keys->n; i++) make_most_recent(found[i]);
    free(found);
    return OK_DATA;
}

/* --- new, close, snapshot */

static bool size_arg(JVal *req, const char *name, BigInt *out) {
    JVal *v = member(req, name); /* absent is None: not an int */
    if (!v || v->type != J_NUM || !v->is_int) return false;
    *out = big_from(v);
    return true;
}

static Outcome do_new(JVal *req) {
    store_drop();
    BigInt max_bytes, nbytes;
    bool ok_max = size_arg(req, "max_bytes", &max_bytes);
    bool ok_nbytes = size_arg(req, "object_nbytes", &nbytes);
    if (!ok_max || !ok_nbytes) return ERR_TYPE;
    BigInt zero = {false, "", 0};
    if (big_cmp(nbytes, zero) <= 0 || big_cmp(max_bytes, nbytes) < 0) return ERR_CONFIG;
    g_store.exists = true;
    g_store.nbytes = big_to_size(nbytes);
    /* capacity = max_bytes // object_nbytes. An object size beyond any line
     * this process can read means nothing is ever stored, so only capacity
     * >= 1 matters then; otherwise long division of the decimal digits. */
    if (g_store.nbytes >= ((size_t)1 << 48)) {
        g_store.capacity = 1;
    } else {
        size_t q = 0, r = 0;
        for (size_t i = 0; i < max_bytes.ndigits; i++) {
            r = r * 10 + (size_t)(max_bytes.digits[i] - '0');
            size_t d = r / g_store.nbytes;
            r %= g_store.nbytes;
            q = q > (SIZE_MAX - d) / 10 ? SIZE_MAX : q * 10 + d;
        }
        g_store.capacity = q;
    }
    return OK_NULL;
}

static int cmp_keys(const void *a, const void *b) {
    const Rec *x = *(Rec *const *)a, *y = *(Rec *const *)b;
    size_t n = x->klen < y->klen ? x->klen : y->klen;
    int c = memcmp(x->key, y->key, n);
    if (c) return c;
    return x->klen < y->klen ? -1 : x->klen > y->klen;
}

static void snapshot(Buf *out) {
    buf_str(out, "{\"entries\": [");
    for (Rec *r = g_store.head; r; r = r->next) {
        buf_str(out, r == g_store.head ? "[" : ", [");
        buf_json_string(out, r->key, r->klen);
        buf_str(out, ", \"");
        buf_hex(out, r->payload, g_store.nbytes);
        buf_str(out, "\"]");
    }
    buf_str(out, "], \"references\": [");
    RecList refs = {0};
    for (size_t i = 0; i < g_store.nbuckets; i++)
        for (Rec *r = g_store.buckets[i]; r; r = r->chain)
            if (r->count > 0) reclist_add(&refs, r);
    if (refs.n) qsort(refs.v, refs.n, sizeof *refs.v, cmp_keys);
    for (size_t i = 0; i < refs.n; i++) {
        buf_str(out, i ? ", [" : "[");
        buf_json_string(out, refs.v[i]->key, refs.v[i]->klen);
        buf_fmt(out, ", %lld]", (long long)refs.v[i]->count);
    }
    free(refs.v);
    buf_str(out, g_store.closed ? "], \"closed\": true}" : "], \"closed\": false}");
}

static void do_close(void) {
    store_drop();
    g_store.exists = true;
    g_store.closed = true;
}

/* ------------------------------------------------------------------ serving */

static bool is_op(const JVal *op, const char *name) {
    return op->slen == strlen(name) && memcmp(op->s, name, op->slen) == 0;
}

/* With --batch the port speaks protocol 2: it answers hello, declaring
 * "batch" (and read_into, snapshot), and takes a line that is an array of
 * requests, answering them in order as one line (docs/protocol.md,
 * "Pipelining"). Without it, it is the protocol 1 port it always was. */
static bool g_batch;
#define MAX_BATCH 1024

/* The answer to one request, without a newline. */
static void answer_request(JVal *req, Buf *out, bool in_message) {
    if (req->type != J_OBJ) malformed("a request is a JSON object");
    JVal *id = member(req, "id");
    if (!id || id->type != J_NUM || !id->is_int) malformed("needs an integer id");
    JVal *op = member(req, "op");
    if (!op || op->type != J_STR) malformed("needs \"op\"");

    if (g_batch && is_op(op, "hello")) {
        if (in_message) malformed("hello inside a message of many requests");
        buf_str(out, "{\"id\": ");
        buf_put(out, id->s, id->slen);
        buf_str(out, ", \"ok\": {\"protocol\": 2, \"capabilities\": [\"batch\", \"read_into\", \"snapshot\"]}}");
        return;
    }
    Outcome result;
    Buf data = {0};
    bool is_snapshot = false;
    if (is_op(op, "new")) {
        result = do_new(req);
    } else {
        if (!g_store.exists) malformed("'%s' before any store (send a successful new first)", op->s);
        if (is_op(op, "put")) {
            JVal *list = member(req, "objects");
            if (list && list->type != J_ARR) malformed("\"objects\" must be a list");
            size_t nobjs = list ? list->n : 0;
            Obj *objs = xmalloc(nobjs * sizeof *objs);
            for (size_t i = 0; i < nobjs; i++) {
                JVal *o = &list->items[i];
                if (o->type != J_ARR || o->n != 2) malformed("each object is [key, hex payload or null]");
                JVal *k = &o->items[0], *p = &o->items[1];
                if (k->type == J_STR) objs[i].key = (Arg){true, k->s, k->slen};
                else if (k->type == J_NUM && k->is_int) objs[i].key = (Arg){false, NULL, 0};
                else malformed("a key must be a string or an integer");
                if (p->type == J_NULL) {
                    objs[i].payload = (Arg){false, NULL, 0};
                } else if (p->type == J_STR) {
                    size_t n;
                    unsigned char *bytes = from_hex(p->s, p->slen, &n);
                    if (!bytes) malformed("payload is not hex");
                    objs[i].payload = (Arg){true, (const char *)bytes, n};
                } else {
                    malformed("payload must be hex or null");
                }
            }
            ArgList retain = key_list(req, "retain", false), release = key_list(req, "release", false);
            result = do_put(objs, nobjs, &retain, &release);
            for (size_t i = 0; i < nobjs; i++) free((void *)objs[i].payload.s);
            free(objs);
            free(retain.v);
            free(release.v);
        } else if (is_op(op, "get")) {
            ArgList keys = key_list(req, "keys", true);
            result = do_read(&keys, NULL, false, &data);
            free(keys.v);
        } else if (is_op(op, "read_into")) {
            JVal *buffer = member(req, "buffer"), *ro = member(req, "readonly");
            if (!buffer || buffer->type != J_NUM || !buffer->is_int || big_from(buffer).neg)
                malformed("\"buffer\" is a size");
            if (ro && ro->type != J_BOOL) malformed("\"readonly\" must be true or false");
            ArgList keys = key_list(req, "keys", true);
            size_t size = big_to_size(big_from(buffer));
            result = do_read(&keys, &size, ro && ro->b, &data);
            free(keys.v);
        } else if (is_op(op, "close")) {
            do_close(); /* idempotent */
            result = OK_NULL;
        } else if (is_op(op, "snapshot")) {
            is_snapshot = true;
            result = OK_DATA;
        } else {
            malformed("unknown op '%s'", op->s);
        }
    }

    buf_str(out, "{\"id\": ");
    buf_put(out, id->s, id->slen);
    if (is_snapshot) {
        buf_str(out, ", \"ok\": ");
        snapshot(out);
        buf_str(out, "}");
    } else if (result == OK_NULL) {
        buf_str(out, ", \"ok\": null}");
    } else if (result == OK_DATA) {
        buf_str(out, ", \"ok\": \"");
        if (data.n) buf_put(out, data.d, data.n);
        buf_str(out, "\"}");
    } else {
        buf_str(out, ", \"error\": \"");
        buf_str(out, KIND_NAME[result]);
        buf_str(out, "\", \"message\": \"");
        buf_str(out, KIND_MESSAGE[result]);
        buf_str(out, "\"}");
    }
    free(data.d);
}

/* The answer line to one request line, or (with --batch) to a message. */
static void answer(char *line, size_t len, Buf *out) {
    JVal req = {0};
    Parser ps = {line, line + len};
    if (!parse_value(&ps, &req, 0)) malformed("not JSON");
    skip_ws(&ps);
    if (ps.p != ps.end) malformed("not JSON (extra text after the value)");
    if (g_batch && req.type == J_ARR) {
        if (req.n == 0 || req.n > MAX_BATCH) malformed("a message holds 1 to %d requests", MAX_BATCH);
        buf_str(out, "[");
        for (size_t i = 0; i < req.n; i++) {
            if (i) buf_str(out, ", ");
            answer_request(&req.items[i], out, true);
        }
        buf_str(out, "]");
    } else {
        answer_request(&req, out, false);
    }
    buf_str(out, "\n");
    json_free(&req);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--batch") == 0) g_batch = true;
        else die(2, "usage: auxport [--batch]");
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    Buf out = {0};
    while ((len = getline(&line, &cap, stdin)) != -1) {
        g_line++;
        size_t n = (size_t)len;
        if (memchr(line, '\0', n)) malformed("a NUL byte in the line");
        bool blank = true;
        for (size_t i = 0; i < n && blank; i++) blank = strchr(" \t\r\n", line[i]) != NULL;
        if (blank) continue; /* as auxspec serve does */
        out.n = 0;
        answer(line, n, &out);
        if (fwrite(out.d, 1, out.n, stdout) != out.n || fflush(stdout) != 0) {
            fprintf(stderr, "auxport: cannot write the answer to request line %ld\n", g_line);
            return 1;
        }
    }
    free(line);
    free(out.d);
    store_drop();
    return 0;
}
