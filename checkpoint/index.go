package checkpoint

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ParseIndex parses model.safetensors.index.json: the weight_map (tensor name
// → shard file name) and metadata.total_size, -1 when the index omits it (the
// loader never needs it; Hugging Face tooling reads only weight_map). Shard
// names must be plain file names inside the checkpoint directory. Every
// problem found is reported, one per line of the error.
func ParseIndex(data []byte) (weightMap map[string]string, totalSize int64, err error) {
	weightMap, totalSize, probs := parseIndex(data)
	if len(probs) > 0 {
		return nil, 0, joinProblems(probs)
	}
	return weightMap, totalSize, nil
}

func parseIndex(data []byte) (map[string]string, int64, []string) {
	var probs []string
	fail := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	if !utf8.Valid(data) {
		return nil, 0, []string{"not valid UTF-8"}
	}
	_, top, err := decodeObject(data)
	if err != nil {
		return nil, 0, []string{err.Error()}
	}

	totalSize := int64(-1)
	if raw, ok := top["metadata"]; ok && !isNull(raw) {
		_, meta, err := decodeObject(raw)
		if err != nil {
			fail("metadata: %v", err)
		} else if ts, ok := meta["total_size"]; ok {
			s := strings.TrimSpace(string(ts))
			if v, e := parseCount(s); e == "" {
				totalSize = v
			} else if f, err := strconv.ParseFloat(s, 64); err == nil && f >= 0 && f == math.Trunc(f) && f < 1<<53 {
				totalSize = int64(f) // some exporters write 1.2e10 or 7.0
			} else {
				fail("metadata.total_size: not a non-negative integer (%s)", clip(s))
			}
		}
	}

	raw, ok := top["weight_map"]
	if !ok {
		fail("weight_map: missing")
		return nil, 0, probs
	}
	keys, vals, err := decodeObject(raw)
	if err != nil {
		fail("weight_map: %v", err)
		return nil, 0, probs
	}
	if len(keys) == 0 {
		fail("weight_map: empty")
	}
	weightMap := make(map[string]string, len(keys))
	bad := map[string]int{} // unusable shard name → tensors naming it
	var badOrder []string
	for _, k := range keys {
		if k == "" {
			fail("weight_map: tensor with an empty name")
			continue
		}
		file, ok := jsonString(vals[k])
		if !ok {
			fail("weight_map: tensor %s: shard name is not a string", show(k))
			continue
		}
		if !plainFileName(file) {
			if bad[file] == 0 {
				badOrder = append(badOrder, file)
			}
			bad[file]++
			continue
		}
		weightMap[k] = file
	}
	for _, f := range badOrder {
		fail("weight_map: shard %s (named for %d tensors) is not a file name inside the checkpoint directory", strconv.Quote(clip(f)), bad[f])
	}
	if len(probs) > 0 {
		return nil, 0, probs
	}
	return weightMap, totalSize, nil
}

// plainFileName accepts a base name only: the index must not point outside
// the checkpoint directory.
func plainFileName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\\\x00")
}
