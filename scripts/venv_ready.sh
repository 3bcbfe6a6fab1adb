# Sourced by the install scripts: `venv_ready TOOL VENV STAMP` ends the calling script (exit 0) when VENV already
# holds a finished install — STAMP is written as an install's last step, so a half-done one is redone.
venv_ready() {
    if [ -f "$3" ] && [ -x "$2/bin/python" ]; then
        echo "$1: $2 is ready ($(cat "$3")); remove it to reinstall"
        exit 0
    fi
}
