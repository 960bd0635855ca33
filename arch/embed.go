package arch

import _ "embed"

// RealConfigJSON is Qwen3.6-35B-A3B's config.json (SPEC §1.1), so plans for
// the real model can be made without its files.
//
//go:embed qwen3.6-35b-a3b.config.json
var RealConfigJSON []byte

// RealName names the real model in plans and file names.
const RealName = "qwen3.6-35b-a3b"

// Real returns the real model's configuration.
func Real() *Config {
	c, err := ParseConfig(RealConfigJSON)
	if err != nil {
		panic("embedded config: " + err.Error())
	}
	return c
}
