# awk_median.awk — the median of a blank-separated list of numbers ("" for an empty one),
# for the awk programs of bench/bounds.sh, scripts/gen_readme_results.sh and
# plots/fa3_sweep.gp (each reads this file into its program). Insertion sort: a list is
# the few repeats of one point. No single quotes here: the shell wraps the programs in them.
function median(list,    n, v, i, j, t) {
    n = split(list, v, " ")
    for (i = 2; i <= n; ++i)
        for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; --j) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
    if (n == 0) return ""
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
