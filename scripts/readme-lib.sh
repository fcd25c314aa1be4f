# Sourced by the scripts that run the README's command blocks as a new user would
# (scripts/quickstart.sh, scripts/setup-check.sh), so that both read a block the same way.

# readme_block README HEADING: the lines of the first ```sh block after the line
# "## HEADING", comment-only and empty lines left out (they run nothing).
readme_block() {
    awk -v heading="## $2" '
        $0 == heading {on = 1; next}
        on && /^```sh/ {block = 1; next}
        block && /^```/ {exit}
        block && !/^[[:space:]]*(#|$)/' "$1"
}
