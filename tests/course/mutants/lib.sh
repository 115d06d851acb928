# shellcheck shell=bash
# lib.sh — sourced by the mutants. replace_once FILE OLD NEW replaces the one occurrence of
# the literal text OLD in FILE with NEW; when OLD occurs other than once it fails (exit 1,
# naming the file and the count), so that a mutant whose target has moved says so instead of
# grading the reference solution under a mutant's name.
replace_once() {
    local file=$1
    [[ -f $file ]] || { echo "mutant: no file $file" >&2; exit 1; }
    OLD=$2 NEW=$3 perl -0777 -i -ne '
        my $n = () = /\Q$ENV{OLD}\E/g;
        if ($n != 1) {
            print; print STDERR "mutant: $ARGV: the text to replace occurs $n times\n"; exit 1
        }
        s/\Q$ENV{OLD}\E/$ENV{NEW}/; print;' "$file" || exit 1
}
