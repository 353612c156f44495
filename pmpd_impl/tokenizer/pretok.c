/* The pre-tokenizer scanners.  Each reads one alternative of its regular
 * expression after the other, in the expression's order, at the start of
 * the text, and returns the length of the first that matches -- what a
 * backtracking engine's leftmost match is, since every alternative here
 * can be decided by looking at most one character past the word.
 *
 * llama-bpe (Llama 3) and qwen2, alternatives in order:
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)   [^\r\n\p{L}\p{N}]?\p{L}+
 *   \p{N}{1,3} (qwen2: \p{N})       ' '?[^\s\p{L}\p{N}]+[\r\n]*
 *   \s*[\r\n]+                      \s+(?!\S)        \s+
 * gpt-2: 's|'t|'re|'ve|'m|'ll|'d   ' '?\p{L}+   ' '?\p{N}+
 *   ' '?[^\s\p{L}\p{N}]+   \s+(?!\S)   \s+ (what the engine's unmatched
 *   remainder amounts to: a lone white space before a non-space)
 * smollm: \p{N} first splits the text into single digits and the runs
 *   between them; gpt-2's expression then splits each run, so a digit acts
 *   as the end of the text for it. */
#include "pmpd_impl/tokenizer/pretok.h"

#include <string.h>

enum { PT_OTHER = 0, PT_LETTER = 1, PT_NUMBER = 2, PT_SPACE = 3, PT_END = 4 };

typedef struct pt_text {
    const unsigned char *s;
    size_t n;
    int digit_ends; /* smollm: a digit after the start ends the text */
} pt_text;

/* Class of the character at byte pos (PT_END past the text), its code
 * point and byte length. */
static int pt_peek(const pt_text *t, size_t pos, uint32_t *cp, size_t *len)
{
    int c;
    *cp = 0;
    *len = 0;
    if (pos >= t->n)
        return PT_END;
    *len = pmpd_utf8_decode(t->s + pos, t->n - pos, cp);
    c = pmpd_unicode_class(*cp);
    if (c == PT_NUMBER && t->digit_ends && pos > 0) {
        *len = 0;
        return PT_END;
    }
    return c;
}

static int pt_class_at(const pt_text *t, size_t pos)
{
    uint32_t cp;
    size_t len;
    return pt_peek(t, pos, &cp, &len);
}

/* Past a run of characters of class c from pos (limit: at most max of them). */
static size_t pt_run(const pt_text *t, size_t pos, int c, size_t max)
{
    uint32_t cp;
    size_t len, count = 0;
    while (count < max && pt_peek(t, pos, &cp, &len) == c) {
        pos += len;
        count++;
    }
    return pos;
}

static uint32_t pt_lower_ascii(uint32_t cp)
{
    return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
}

/* 's 't 're 've 'm 'll 'd at the start (the text starts with '\''), with
 * the letters matched case-insensitively when fold is set: 0 when none. */
static size_t pt_contraction(const pt_text *t, int fold)
{
    uint32_t a, b;
    size_t la, lb;
    pt_peek(t, 1, &a, &la);
    pt_peek(t, 1 + la, &b, &lb);
    if (la == 0)
        return 0;
    if (fold) {
        a = pt_lower_ascii(a);
        b = lb ? pt_lower_ascii(b) : 0;
    }
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
        return 1 + la;
    if (lb && ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')))
        return 1 + la + lb;
    return 0;
}

/* \s+(?!\S) then \s+, at a white space: the whole run when it ends the
 * text or is one character, else all but its last character (which then
 * prefixes the next word).  With newlines, \s*[\r\n]+ first (llama3 and
 * qwen2): up to and including the run's last \r or \n. */
static size_t pt_spaces(const pt_text *t, int newline_rule)
{
    uint32_t cp;
    size_t len, pos = 0, last_start = 0, after_newline = 0, count = 0;
    while (pt_peek(t, pos, &cp, &len) == PT_SPACE) {
        if (cp == '\r' || cp == '\n')
            after_newline = pos + len;
        last_start = pos;
        pos += len;
        count++;
    }
    if (newline_rule && after_newline)
        return after_newline;
    if (count > 1 && pt_class_at(t, pos) != PT_END)
        return last_start;
    return pos;
}

static size_t pt_llama3(const pt_text *t, size_t max_digits)
{
    uint32_t cp0, cp;
    size_t len0, len, pos;
    int c0 = pt_peek(t, 0, &cp0, &len0), c;
    if (cp0 == '\'') {
        size_t m = pt_contraction(t, 1);
        if (m)
            return m;
    }
    if (c0 == PT_LETTER || (cp0 != '\r' && cp0 != '\n' && c0 != PT_NUMBER && pt_class_at(t, len0) == PT_LETTER))
        return pt_run(t, len0, PT_LETTER, (size_t)-1);
    if (c0 == PT_NUMBER)
        return pt_run(t, 0, PT_NUMBER, max_digits);
    pos = cp0 == ' ' ? len0 : 0;
    if (pt_class_at(t, pos) == PT_OTHER) {
        pos = pt_run(t, pos, PT_OTHER, (size_t)-1);
        while ((c = pt_peek(t, pos, &cp, &len)) == PT_SPACE && (cp == '\r' || cp == '\n'))
            pos += len;
        return pos;
    }
    return pt_spaces(t, 1);
}

static size_t pt_gpt2(const pt_text *t)
{
    uint32_t cp0;
    size_t len0, pos;
    int c0 = pt_peek(t, 0, &cp0, &len0), c;
    if (t->digit_ends && c0 == PT_NUMBER)
        return len0;
    if (cp0 == '\'') {
        size_t m = pt_contraction(t, 0);
        if (m)
            return m;
    }
    pos = cp0 == ' ' ? len0 : 0;
    c = pt_class_at(t, pos);
    if (c == PT_LETTER || c == PT_NUMBER || c == PT_OTHER)
        return pt_run(t, pos, c, (size_t)-1);
    return pt_spaces(t, 0);
}

PMPD_INTERNAL size_t pmpd_pretok_next(uint32_t kind, const unsigned char *text, size_t length)
{
    pt_text t;
    size_t n;
    t.s = text;
    t.n = length;
    t.digit_ends = kind == PMPD_PRETOK_SMOLLM;
    switch (kind) {
    case PMPD_PRETOK_LLAMA3: n = pt_llama3(&t, 3); break;
    case PMPD_PRETOK_QWEN2: n = pt_llama3(&t, 1); break;
    default: n = pt_gpt2(&t); break;
    }
    /* Every branch consumes at least one character; this keeps a caller's
     * loop finite whatever happens. */
    return n > 0 ? n : 1;
}

static const struct {
    const char *name;
    uint32_t kind;
} pt_names[] = {
    {"llama-bpe", PMPD_PRETOK_LLAMA3}, {"llama3", PMPD_PRETOK_LLAMA3}, {"llama-v3", PMPD_PRETOK_LLAMA3},
    {"qwen2", PMPD_PRETOK_QWEN2},      {"smollm", PMPD_PRETOK_SMOLLM}, {"gpt-2", PMPD_PRETOK_GPT2},
    /* other models trained with the same expressions */
    {"starcoder", PMPD_PRETOK_SMOLLM}, {"refact", PMPD_PRETOK_SMOLLM}, {"mpt", PMPD_PRETOK_GPT2},
    {"deepseek-r1-qwen", PMPD_PRETOK_QWEN2},
};

PMPD_INTERNAL uint32_t pmpd_pretok_from_name(const char *name, size_t length)
{
    size_t i;
    for (i = 0; i < sizeof pt_names / sizeof pt_names[0]; i++)
        if (strlen(pt_names[i].name) == length && memcmp(pt_names[i].name, name, length) == 0)
            return pt_names[i].kind;
    return 0;
}

PMPD_INTERNAL const char *pmpd_pretok_name(uint32_t kind)
{
    size_t i;
    for (i = 0; i < sizeof pt_names / sizeof pt_names[0]; i++)
        if (pt_names[i].kind == kind)
            return pt_names[i].name;
    return NULL;
}
