/* cli_json.c — the strict JSON reader of cli_json.h: recursive descent over RFC 8259's grammar. */
#include "cli_json.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CJ_MAX_DEPTH 64

typedef struct cj_in {
  const unsigned char *s;
  size_t n, i;
  const char *why;
  int depth;
} cj_in;

static int cj_fail(cj_in *in, const char *why) {
  if (!in->why) in->why = why;
  return -1;
}

static void skip_ws(cj_in *in) {
  while (in->i < in->n && (in->s[in->i] == ' ' || in->s[in->i] == '\t' || in->s[in->i] == '\n' || in->s[in->i] == '\r'))
    in->i++;
}

/* Length of the valid UTF-8 sequence at p (at most avail bytes), 0 if none (as cli_common.c's writer checks). */
static int cj_utf8_len(const unsigned char *p, size_t avail) {
  const unsigned c = p[0];
#define CONT(k) (avail > (k) && p[k] >= 0x80 && p[k] <= 0xbf)
  if (c >= 0xc2 && c <= 0xdf) return CONT(1) ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) {
    const unsigned lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    return avail > 2 && p[1] >= lo && p[1] <= hi && CONT(2) ? 3 : 0;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    const unsigned lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    return avail > 3 && p[1] >= lo && p[1] <= hi && CONT(2) && CONT(3) ? 4 : 0;
  }
#undef CONT
  return 0;
}

static int hex4(cj_in *in, unsigned *v) {
  *v = 0;
  for (int k = 0; k < 4; k++) {
    if (in->i >= in->n) return cj_fail(in, "a \\u escape cut short");
    const unsigned char c = in->s[in->i++];
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return cj_fail(in, "a \\u escape needs four hex digits");
    *v = *v * 16 + (unsigned)d;
  }
  return 0;
}

/* Append code point cp as UTF-8 to out (cap bytes, kept NUL-terminated; a character that does not fit whole is
 * dropped, and so is everything after it). */
static void put_cp(char *out, size_t cap, size_t *len, int *full, unsigned cp) {
  unsigned char b[4];
  size_t k;
  if (cp < 0x80) b[0] = (unsigned char)cp, k = 1;
  else if (cp < 0x800) b[0] = (unsigned char)(0xc0 | cp >> 6), b[1] = (unsigned char)(0x80 | (cp & 0x3f)), k = 2;
  else if (cp < 0x10000)
    b[0] = (unsigned char)(0xe0 | cp >> 12), b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f)),
    b[2] = (unsigned char)(0x80 | (cp & 0x3f)), k = 3;
  else
    b[0] = (unsigned char)(0xf0 | cp >> 18), b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f)),
    b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f)), b[3] = (unsigned char)(0x80 | (cp & 0x3f)), k = 4;
  if (!out || *full) return;
  if (*len + k + 1 > cap) {
    *full = 1;
    return;
  }
  memcpy(out + *len, b, k);
  *len += k;
  out[*len] = 0;
}

/* A string at in->i (the opening quote); decoded into out (cap bytes) when out is not NULL. */
static int parse_string(cj_in *in, char *out, size_t cap) {
  size_t len = 0;
  int full = 0;
  if (out && cap) out[0] = 0;
  in->i++; /* the quote */
  for (;;) {
    if (in->i >= in->n) return cj_fail(in, "a string without its closing quote");
    const unsigned char c = in->s[in->i];
    if (c == '"') {
      in->i++;
      return 0;
    }
    if (c < 0x20) return cj_fail(in, "a control character inside a string (it must be escaped)");
    if (c == '\\') {
      in->i++;
      if (in->i >= in->n) return cj_fail(in, "an escape cut short");
      const unsigned char e = in->s[in->i++];
      unsigned cp;
      switch (e) {
        case '"': cp = '"'; break;
        case '\\': cp = '\\'; break;
        case '/': cp = '/'; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u': {
          if (hex4(in, &cp)) return -1;
          if (cp >= 0xd800 && cp <= 0xdbff) { /* a high surrogate: its low half must follow */
            unsigned lo;
            if (in->i + 1 >= in->n || in->s[in->i] != '\\' || in->s[in->i + 1] != 'u')
              return cj_fail(in, "a lone UTF-16 high surrogate");
            in->i += 2;
            if (hex4(in, &lo)) return -1;
            if (lo < 0xdc00 || lo > 0xdfff) return cj_fail(in, "a UTF-16 high surrogate without its low half");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          } else if (cp >= 0xdc00 && cp <= 0xdfff) {
            return cj_fail(in, "a lone UTF-16 low surrogate");
          }
          break;
        }
        default: return cj_fail(in, "an unknown escape in a string");
      }
      put_cp(out, cap, &len, &full, cp);
      continue;
    }
    if (c < 0x80) {
      put_cp(out, cap, &len, &full, c);
      in->i++;
      continue;
    }
    const int k = cj_utf8_len(in->s + in->i, in->n - in->i);
    if (!k) return cj_fail(in, "invalid UTF-8 in a string");
    if (out && !full) {
      if (len + (size_t)k + 1 > cap) {
        full = 1;
      } else {
        memcpy(out + len, in->s + in->i, (size_t)k);
        len += (size_t)k;
        out[len] = 0;
      }
    }
    in->i += (size_t)k;
  }
}

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static int parse_number(cj_in *in, double *v) {
  const size_t start = in->i;
  if (in->i < in->n && in->s[in->i] == '-') in->i++;
  if (in->i >= in->n || !is_digit(in->s[in->i])) return cj_fail(in, "a number needs a digit");
  if (in->s[in->i] == '0') {
    in->i++;
    if (in->i < in->n && is_digit(in->s[in->i])) return cj_fail(in, "a number with a leading zero");
  } else {
    while (in->i < in->n && is_digit(in->s[in->i])) in->i++;
  }
  if (in->i < in->n && in->s[in->i] == '.') {
    in->i++;
    if (in->i >= in->n || !is_digit(in->s[in->i])) return cj_fail(in, "a digit must follow a decimal point");
    while (in->i < in->n && is_digit(in->s[in->i])) in->i++;
  }
  if (in->i < in->n && (in->s[in->i] == 'e' || in->s[in->i] == 'E')) {
    in->i++;
    if (in->i < in->n && (in->s[in->i] == '+' || in->s[in->i] == '-')) in->i++;
    if (in->i >= in->n || !is_digit(in->s[in->i])) return cj_fail(in, "an exponent needs a digit");
    while (in->i < in->n && is_digit(in->s[in->i])) in->i++;
  }
  char buf[64];
  const size_t len = in->i - start;
  if (len < sizeof buf) {
    memcpy(buf, in->s + start, len);
    buf[len] = 0;
    *v = strtod(buf, NULL);
  } else {
    *v = NAN; /* valid, but longer than any number the CLI writes */
  }
  return 0;
}

static int literal(cj_in *in, const char *word) {
  const size_t k = strlen(word);
  if (in->n - in->i < k || memcmp(in->s + in->i, word, k) != 0) return cj_fail(in, "not a JSON value");
  in->i += k;
  return 0;
}

static int parse_value(cj_in *in, cj_field *f);

/* An object at in->i ('{'); its members into o when o is not NULL (the top level). */
static int parse_object(cj_in *in, cj_obj *o) {
  if (++in->depth > CJ_MAX_DEPTH) return cj_fail(in, "nested too deep");
  in->i++;
  skip_ws(in);
  if (in->i < in->n && in->s[in->i] == '}') {
    in->i++;
    in->depth--;
    return 0;
  }
  for (;;) {
    skip_ws(in);
    if (in->i >= in->n || in->s[in->i] != '"') return cj_fail(in, "an object member needs a string key");
    cj_field tmp, *f = o && o->n < CJ_MAX_FIELDS ? &o->f[o->n] : &tmp;
    memset(f, 0, sizeof *f);
    if (parse_string(in, f->key, sizeof f->key)) return -1;
    skip_ws(in);
    if (in->i >= in->n || in->s[in->i] != ':') return cj_fail(in, "a ':' must follow an object key");
    in->i++;
    skip_ws(in);
    if (parse_value(in, f)) return -1;
    if (o && f != &tmp) o->n++;
    skip_ws(in);
    if (in->i < in->n && in->s[in->i] == ',') {
      in->i++;
      continue;
    }
    if (in->i < in->n && in->s[in->i] == '}') {
      in->i++;
      in->depth--;
      return 0;
    }
    return cj_fail(in, "a ',' or '}' must follow an object member");
  }
}

static int parse_array(cj_in *in) {
  if (++in->depth > CJ_MAX_DEPTH) return cj_fail(in, "nested too deep");
  in->i++;
  skip_ws(in);
  if (in->i < in->n && in->s[in->i] == ']') {
    in->i++;
    in->depth--;
    return 0;
  }
  for (;;) {
    skip_ws(in);
    cj_field tmp;
    if (parse_value(in, &tmp)) return -1;
    skip_ws(in);
    if (in->i < in->n && in->s[in->i] == ',') {
      in->i++;
      continue;
    }
    if (in->i < in->n && in->s[in->i] == ']') {
      in->i++;
      in->depth--;
      return 0;
    }
    return cj_fail(in, "a ',' or ']' must follow an array element");
  }
}

static int parse_value(cj_in *in, cj_field *f) {
  if (in->i >= in->n) return cj_fail(in, "a value is missing");
  const unsigned char c = in->s[in->i];
  if (c == '{') {
    f->type = CJ_NESTED;
    return parse_object(in, NULL);
  }
  if (c == '[') {
    f->type = CJ_NESTED;
    return parse_array(in);
  }
  if (c == '"') {
    f->type = CJ_STR;
    return parse_string(in, f->str, sizeof f->str);
  }
  if (c == 't' || c == 'f') {
    f->type = CJ_BOOL;
    f->num = c == 't';
    return literal(in, c == 't' ? "true" : "false");
  }
  if (c == 'n') {
    f->type = CJ_NULL;
    return literal(in, "null");
  }
  f->type = CJ_NUM;
  return parse_number(in, &f->num);
}

static int run(const char *text, size_t len, cj_obj *o, int want_object, const char **why, size_t *at) {
  cj_in in = {(const unsigned char *)text, len, 0, NULL, 0};
  if (o) o->n = 0;
  skip_ws(&in);
  int rc;
  if (want_object) {
    rc = in.i < in.n && in.s[in.i] == '{' ? parse_object(&in, o) : cj_fail(&in, "the line is not a JSON object");
  } else {
    cj_field f;
    rc = parse_value(&in, &f);
  }
  if (rc == 0) {
    skip_ws(&in);
    if (in.i != in.n) rc = cj_fail(&in, "something follows the value");
  }
  if (rc) {
    if (why) *why = in.why ? in.why : "invalid JSON";
    if (at) *at = in.i;
  }
  return rc;
}

int cli_json_validate(const char *text, size_t len, const char **why, size_t *at) {
  return run(text, len, NULL, 0, why, at);
}

int cli_json_object(const char *text, size_t len, cj_obj *o, const char **why, size_t *at) {
  return run(text, len, o, 1, why, at);
}

const cj_field *cj_get(const cj_obj *o, const char *key) {
  for (int i = 0; i < o->n; i++)
    if (!strcmp(o->f[i].key, key)) return &o->f[i];
  return NULL;
}

double cj_num(const cj_obj *o, const char *key) {
  const cj_field *f = cj_get(o, key);
  return f && f->type == CJ_NUM ? f->num : NAN;
}

const char *cj_str(const cj_obj *o, const char *key) {
  const cj_field *f = cj_get(o, key);
  return f && f->type == CJ_STR ? f->str : NULL;
}
