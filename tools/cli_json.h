/* cli_json.h — a small, strict JSON reader for the CLI's own JSON lines: `w8a8 plot` reads them back, and
 * the tests check that every line a command writes is valid JSON (RFC 8259: UTF-8 text, no trailing commas,
 * no NaN, numbers and escapes as the grammar has them).
 *
 * One line holds one object; cli_json_object() validates all of it and keeps the object's top-level scalar
 * members (strings, numbers, true / false, null); nested arrays and objects are validated and skipped. */
#ifndef W8A8_CLI_JSON_H
#define W8A8_CLI_JSON_H
#include <stddef.h>

typedef enum cj_type { CJ_NULL, CJ_BOOL, CJ_NUM, CJ_STR, CJ_NESTED } cj_type;

typedef struct cj_field {
  char key[48];  /* longer keys are cut (they are still validated) */
  cj_type type;
  double num;    /* CJ_NUM; CJ_BOOL: 0 or 1 */
  char str[192]; /* CJ_STR, decoded to UTF-8; longer strings are cut at a character boundary */
} cj_field;

#define CJ_MAX_FIELDS 96
typedef struct cj_obj {
  cj_field f[CJ_MAX_FIELDS]; /* members past CJ_MAX_FIELDS are validated, not kept */
  int n;
} cj_obj;

/* Validate text[0..len) as one JSON value (surrounding blanks allowed): 0, or -1 with *why and *at (the
 * byte offset of the error). */
int cli_json_validate(const char *text, size_t len, const char **why, size_t *at);
/* The same for a text that must be one object; its top-level members into *o (o may be NULL). */
int cli_json_object(const char *text, size_t len, cj_obj *o, const char **why, size_t *at);
/* The member named key, or NULL. */
const cj_field *cj_get(const cj_obj *o, const char *key);
/* A member as a number (NaN when absent or not a number) or a string (NULL when absent or not a string). */
double cj_num(const cj_obj *o, const char *key);
const char *cj_str(const cj_obj *o, const char *key);

#endif
