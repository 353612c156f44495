/* Code point classes for the pre-tokenizers: a binary search over the
 * generated run table (unicode_classes.h), plus the White_Space list. */
#include "pmpd_impl/tokenizer/pretok.h"

#include "pmpd_impl/tokenizer/unicode_classes.h"

/* Unicode's White_Space property (PropList.txt), which is what \s means to
 * the Python, Rust and Oniguruma engines the expressions come from. */
static int ucls_is_space(uint32_t cp)
{
    if (cp <= 0x20)
        return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
    if (cp < 0x85)
        return 0;
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

PMPD_INTERNAL int pmpd_unicode_class(uint32_t cp)
{
    size_t lo = 0, hi = PMPD_UNICODE_CLASS_RUNS;
    if (ucls_is_space(cp))
        return 3;
    if (cp < 0x80) /* the common case, without the search */
        return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z' ? 1 : (cp >= '0' && cp <= '9' ? 2 : 0);
    if (cp > 0x10FFFF)
        return 0;
    /* The last run whose first code point is <= cp (entry 0 starts at 0). */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if ((pmpd_unicode_class_runs[mid] >> 2) <= cp)
            lo = mid;
        else
            hi = mid;
    }
    return (int)(pmpd_unicode_class_runs[lo] & 3u);
}

PMPD_INTERNAL size_t pmpd_utf8_decode(const unsigned char *text, size_t length, uint32_t *cp)
{
    unsigned char lead = text[0];
    size_t need, i;
    uint32_t value;
    if (lead < 0x80) {
        *cp = lead;
        return 1;
    }
    if (lead < 0xC0 || lead >= 0xF8)
        goto invalid;
    need = lead < 0xE0 ? 1 : (lead < 0xF0 ? 2 : 3);
    if (length <= need)
        goto invalid;
    value = lead & (0x3Fu >> need);
    for (i = 1; i <= need; i++) {
        if ((text[i] & 0xC0) != 0x80)
            goto invalid;
        value = value << 6 | (text[i] & 0x3Fu);
    }
    *cp = value;
    return need + 1;
invalid:
    *cp = 0xFFFD;
    return 1;
}
