package checkpoint

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseIndex(t *testing.T) {
	tests := []struct {
		name     string
		json     string
		want     map[string]string
		total    int64
		problems []string
	}{
		{
			name:  "valid",
			json:  `{"metadata":{"total_size":71903645408,"format":"pt"},"weight_map":{"a":"s1.safetensors","b":"s2.safetensors"}}`,
			want:  map[string]string{"a": "s1.safetensors", "b": "s2.safetensors"},
			total: 71903645408,
		},
		{
			name:  "total_size written as a float",
			json:  `{"metadata":{"total_size":7.0e3},"weight_map":{"a":"s"}}`,
			want:  map[string]string{"a": "s"},
			total: 7000,
		},
		{
			name:  "no metadata",
			json:  `{"weight_map":{"a":"s"}, "extra": [1]}`,
			want:  map[string]string{"a": "s"},
			total: -1,
		},
		{name: "not JSON", json: `{"weight_map":`, problems: []string{"not valid JSON: unexpected EOF"}},
		{name: "not an object", json: `"x"`, problems: []string{"not a JSON object"}},
		{name: "invalid UTF-8", json: "{\"weight_map\":{\"\xfe\":\"s\"}}", problems: []string{"not valid UTF-8"}},
		{name: "duplicate top key", json: `{"weight_map":{},"weight_map":{}}`, problems: []string{`duplicate key "weight_map"`}},
		{name: "weight_map missing", json: `{"metadata":{}}`, problems: []string{"weight_map: missing"}},
		{name: "weight_map not an object", json: `{"weight_map":null}`, problems: []string{"weight_map: not a JSON object"}},
		{name: "weight_map empty", json: `{"weight_map":{}}`, problems: []string{"weight_map: empty"}},
		{
			name:     "tensor mapped twice",
			json:     `{"weight_map":{"a":"s1","a":"s2"}}`,
			problems: []string{`weight_map: duplicate key "a"`},
		},
		{
			name: "bad entries",
			json: `{"metadata":{"total_size":-5},"weight_map":{"a":1,"":"s","b":"../s","c":"/etc/passwd","d":"../s","e":"."}}`,
			problems: []string{
				"metadata.total_size: not a non-negative integer (-5)",
				"weight_map: tensor a: shard name is not a string",
				"weight_map: tensor with an empty name",
				`weight_map: shard "../s" (named for 2 tensors) is not a file name inside the checkpoint directory`,
				`weight_map: shard "/etc/passwd" (named for 1 tensors) is not a file name inside the checkpoint directory`,
				`weight_map: shard "." (named for 1 tensors) is not a file name inside the checkpoint directory`,
			},
		},
		{name: "metadata not an object", json: `{"metadata":3,"weight_map":{"a":"s"}}`, problems: []string{"metadata: not a JSON object"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wm, total, err := ParseIndex([]byte(tt.json))
			var problems []string
			if err != nil {
				problems = strings.Split(err.Error(), "\n")
			}
			if diff := cmp.Diff(tt.problems, problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, wm); diff != "" {
				t.Errorf("weight map (-want +got):\n%s", diff)
			}
			if total != tt.total {
				t.Errorf("total_size %d, want %d", total, tt.total)
			}
		})
	}
}
