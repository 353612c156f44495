#include "pmpd_impl/format/chat_template.h"

#include "pmpd_impl/core/error.h"
#include "pmpd_impl/format/le.h"

/* Bytes of the well-formed UTF-8 sequence at s (RFC 3629), or 0. */
static unsigned chat_utf8_length(const unsigned char *s, uint64_t left)
{
    unsigned n, i;
    uint32_t cp;
    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xC2 && s[0] <= 0xDF)
        n = 2, cp = s[0] & 0x1Fu;
    else if (s[0] >= 0xE0 && s[0] <= 0xEF)
        n = 3, cp = s[0] & 0x0Fu;
    else if (s[0] >= 0xF0 && s[0] <= 0xF4)
        n = 4, cp = s[0] & 0x07u;
    else
        return 0;
    if (left < n)
        return 0;
    for (i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3Fu);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

PMPD_INTERNAL pmpd_status pmpd_chat_template_check(const unsigned char *text, uint64_t length, uint64_t at,
                                                   const char *what, pmpd_error *err)
{
    uint64_t i = 0;
    if (length > PMPD_CHAT_TEMPLATE_MAX_BYTES)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, at, "%s is %llu bytes, more than %u", what,
                              (unsigned long long)length, PMPD_CHAT_TEMPLATE_MAX_BYTES);
    while (i < length) {
        unsigned n;
        if (text[i] == 0)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, at + i, "%s byte %llu is NUL", what,
                                  (unsigned long long)i);
        if (!(n = chat_utf8_length(text + i, length - i)))
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, at + i, "%s byte %llu (0x%02x) is not UTF-8", what,
                                  (unsigned long long)i, (unsigned)text[i]);
        i += n;
    }
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_chat_template_parse(const unsigned char *data, uint64_t size, uint64_t at,
                                                   const char **text, uint32_t *length, pmpd_error *err)
{
    uint32_t n;
    pmpd_status status;
    if (size < 4)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_TRUNCATED, at, "chat template section is %llu bytes, less than its 4-byte length",
                              (unsigned long long)size);
    n = pmpd_le_u32(data);
    if ((uint64_t)n + 4 != size)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, at, "chat template length %u disagrees with its %llu-byte section",
                              (unsigned)n, (unsigned long long)size);
    if ((status = pmpd_chat_template_check(data + 4, n, at + 4, "chat template", err)) != PMPD_OK)
        return status;
    *text = (const char *)(data + 4);
    *length = n;
    return PMPD_OK;
}

/* The accessor lives here with the format it exposes. */
#include "pmpd_impl/model/model.h"

pmpd_status pmpd_model_chat_template(const pmpd_model *model, const char **text, size_t *length)
{
    if (!model || !text || !length)
        return PMPD_ERR_INVALID_ARGUMENT;
    if (!model->chat_template)
        return PMPD_ERR_FORMAT_MISSING;
    *text = model->chat_template;
    *length = model->chat_template_length;
    return PMPD_OK;
}
