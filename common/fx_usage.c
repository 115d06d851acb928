/*
 * fx_usage.c — --help (fx_usage.h), its options written from fx_option_table.
 */
#include "fx_usage.h"

#include <limits.h>
#include <string.h>

/* Where the help text of an option starts: an option and its value name longer than this
 * put their help on the next line. */
enum { HELP_COLUMN = 24 };
/* The widest line the help writes: a default that would pass it goes on a line of its own. */
enum { HELP_WIDTH = 92 };

/* " (default D, range lo..hi)", the parts that apply, or "". */
static void default_and_range(const fx_option_spec *s, char *buf, size_t len)
{
    char dflt[64], range[64] = "";
    fx_option_default_text(s, dflt, sizeof dflt);
    /* The sizes' range is [1, INT_MAX]: fx_problem_validate's messages say more. */
    if (s->kind == FX_OPT_INT && s->hi < INT_MAX)
        snprintf(range, sizeof range, "range %lld..%lld", s->lo, s->hi);
    if (dflt[0] && range[0])
        snprintf(buf, len, " (default %s, %s)", dflt, range);
    else if (dflt[0] || range[0])
        snprintf(buf, len, " (%s%s%s)", dflt[0] ? "default " : "", dflt, range);
    else
        buf[0] = '\0';
}

static void print_option(const fx_option_spec *s, FILE *f)
{
    char head[96], tail[160];
    snprintf(head, sizeof head, "%s%s%s%s%s", s->name, s->alias ? ", " : "",
             s->alias ? s->alias : "", s->value ? " " : "", s->value ? s->value : "");
    default_and_range(s, tail, sizeof tail);
    int width = (int)strlen(head) + 2;
    fprintf(f, "  %s", head);
    if (width >= HELP_COLUMN) {
        fprintf(f, "\n");
        width = 0;
    }
    /* The help's lines, each indented to HELP_COLUMN; the default after the last, or on a
     * line of its own where it would not fit. */
    for (const char *line = s->help; line;) {
        const char *nl = strchr(line, '\n');
        int n = nl ? (int)(nl - line) : (int)strlen(line);
        fprintf(f, "%*s%.*s", HELP_COLUMN - width, "", n, line);
        width = 0;
        line = nl ? nl + 1 : NULL;
        if (line)
            fprintf(f, "\n");
        else if (HELP_COLUMN + n + (int)strlen(tail) <= HELP_WIDTH)
            fprintf(f, "%s\n", tail);
        else if (tail[0])
            fprintf(f, "\n%*s%s\n", HELP_COLUMN, "", tail + 1); /* without its blank */
        else
            fprintf(f, "\n");
    }
}

void fx_usage_options(fx_opt_group group, FILE *f)
{
    size_t n = 0;
    const fx_option_spec *table = fx_option_table(&n);
    for (size_t i = 0; i < n; ++i)
        if (table[i].group == group)
            print_option(&table[i], f);
}

void fx_usage(const fx_ctx *c, FILE *f)
{
    char caps[1024];
    fprintf(f,
            "usage: stage_%s [options]\n\n"
            "stage %s: %s\n\n",
            c->self->id, c->self->id, c->self->summary);
    fx_caps_describe(c->self, caps, sizeof caps);
    fprintf(f, "capabilities:\n%s\n", caps);
    if (c->n_stages > 1) {
        fprintf(f, "checks against:");
        for (int i = 0; i < c->n_stages - 1; ++i)
            fprintf(f, " %s", c->stages[i]->id);
        fprintf(f, " (the nearest that covers the case), and the fp64 reference\n\n");
    } else {
        fprintf(f, "checks against: the fp64 reference\n\n");
    }
    fprintf(f, "problem:\n");
    fx_usage_options(FX_OPT_PROBLEM, f);
    fprintf(f, "modes (default --check):\n");
    fx_usage_options(FX_OPT_MODE, f);
    fprintf(f, "exit codes: 0 ok, 1 check failed or CUDA error, 2 bad usage or outside the\n"
               "capabilities, 77 no suitable GPU (FX_REQUIRE_GPU=1 makes that 1)\n");
}
