#!/usr/bin/env bash
# Builds zkr's API reference (HTML, Doxygen) into ${1:-build-docs}/html and fails on any doxygen
# warning, so an undocumented public name or a broken doc comment fails CI.
#
#   scripts/docs.sh [OUTPUT_DIR]
#
# Needs only doxygen (scripts/setup.sh installs it) and perl, not a build: zkr/version.hpp, which
# CMake generates from cmake/version.hpp.in, is configured here the same way from
# CMakeLists.txt's project version. The configuration is docs/Doxyfile; the warnings, if any,
# are also left in OUTPUT_DIR/doxygen-warnings.log.
set -euo pipefail

root=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)

# The reference's pages: keep in step with INPUT in docs/Doxyfile.
pages=("$root/README.md" "$root/CHANGELOG.md" "$root"/docs/*.md)

# Doxygen runs this script again as the input filter of every markdown page (FILTER_PATTERNS in
# docs/Doxyfile), with ZKR_DOCS_PAGES set and the page as the only argument. A markdown link to
# another page stays a link (without its #fragment: doxygen 1.9 gives headings no anchors). A
# link to any other .md file of the repository (bench/RESULTS.md, a tool's README, ...) is
# outside the reference: doxygen would warn that it cannot resolve it, so it becomes plain text.
# Lines are kept one for one, so warnings still name the right line.
if [[ -n ${ZKR_DOCS_PAGES:-} ]]; then
    exec perl -e '
        use strict;
        use warnings;
        use Cwd qw(abs_path);
        use File::Basename qw(dirname);
        my ($file) = @ARGV;
        my %page = map { $_ => 1 } grep { defined } map { abs_path($_) } grep { -f } split /\n/, $ENV{ZKR_DOCS_PAGES};
        my $dir = dirname(abs_path($file));
        sub relink {
            my ($text, $target, $fragment) = @_;
            my $path = "$dir/$target";
            return "[$text]($target)" if -f $path && $page{abs_path($path)};
            return $text =~ m{^[\w./-]+$} ? "`$text`" : $text;
        }
        open(my $in, "<", $file) or die "docs.sh: $file: $!\n";
        my $fenced = 0;
        while (my $line = <$in>) {
            $fenced = !$fenced if $line =~ /^\s*(```|~~~)/;
            $line =~ s{\[([^\]\n]*)\]\(((?![a-zA-Z][a-zA-Z0-9+.-]*:)[^()\s#]+\.md)(#[^()\s]*)?\)}{relink($1, $2, $3)}ge
                unless $fenced;
            print $line;
        }
    ' "$1"
fi

out=${1:-build-docs}

if ! command -v doxygen >/dev/null 2>&1; then
    echo "docs.sh: doxygen is not installed; run scripts/setup.sh first" >&2
    exit 1
fi

mkdir -p -- "$out"
out=$(cd -- "$out" && pwd)
if [[ $root$out =~ [[:space:]] ]]; then
    echo "docs.sh: paths with white space are not supported by doxygen's filters: $root, $out" >&2
    exit 1
fi

# The project version, as CMake's project() sets it.
version=$(sed -nE 's/^[[:space:]]*project\(zkr[[:space:]]+VERSION[[:space:]]+([0-9]+\.[0-9]+\.[0-9]+).*/\1/p' \
    "$root/CMakeLists.txt" | head -n 1)
if [[ -z $version ]]; then
    echo "docs.sh: no 'project(zkr VERSION x.y.z' in CMakeLists.txt" >&2
    exit 1
fi
IFS=. read -r major minor patch <<<"$version"

# zkr/version.hpp, configured as CMake's configure_file(... @ONLY) does.
generated="$out/generated/include"
mkdir -p -- "$generated/zkr"
sed -e "s/@PROJECT_VERSION_MAJOR@/$major/g" \
    -e "s/@PROJECT_VERSION_MINOR@/$minor/g" \
    -e "s/@PROJECT_VERSION_PATCH@/$patch/g" \
    -e "s/@PROJECT_VERSION@/$version/g" \
    "$root/cmake/version.hpp.in" >"$generated/zkr/version.hpp"
if grep -q '@[A-Za-z_]*@' "$generated/zkr/version.hpp"; then
    echo "docs.sh: cmake/version.hpp.in has a variable this script does not know:" >&2
    grep -n '@[A-Za-z_]*@' "$generated/zkr/version.hpp" >&2
    exit 1
fi

# A fresh tree: pages of names that no longer exist must not linger.
rm -rf -- "$out/html"
log="$out/doxygen-warnings.log"
rm -f -- "$log"

status=0
(
    cd -- "$root"
    export ZKR_DOCS_OUT="$out" ZKR_DOCS_GENERATED="$generated" ZKR_DOCS_VERSION="$version"
    export ZKR_DOCS_MD_FILTER="$root/scripts/docs.sh"
    ZKR_DOCS_PAGES=$(printf '%s\n' "${pages[@]}")
    export ZKR_DOCS_PAGES
    doxygen docs/Doxyfile
) || status=$?

if [[ -s $log ]]; then
    echo "docs.sh: doxygen warnings ($(grep -c . "$log") lines, also in $log):" >&2
    cat -- "$log" >&2
    exit 1
fi
if [[ $status -ne 0 ]]; then
    echo "docs.sh: doxygen failed (exit status $status)" >&2
    exit "$status"
fi
echo "docs.sh: $out/html/index.html"
