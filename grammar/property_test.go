package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// validator compiles schema with an independent JSON Schema implementation.
func validator(t testing.TB, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatalf("schema: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		t.Fatalf("schema: %v", err)
	}
	return s
}

// checkValid parses text as JSON and validates it.
func checkValid(t testing.TB, s *jsonschema.Schema, text string) {
	t.Helper()
	if !json.Valid([]byte(text)) {
		t.Fatalf("not JSON: %q", text)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(text)))
	if err != nil {
		t.Fatalf("%q: %v", text, err)
	}
	if err := s.Validate(inst); err != nil {
		t.Fatalf("%q does not satisfy the schema: %v", text, err)
	}
}

// propertySchemas are schemas for the random-walk property test.
var propertySchemas = []string{
	nestedSchema,
	`{"type":"object","properties":{"x":{"type":"integer","minimum":-5,"maximum":5}},"required":["x"],"additionalProperties":false}`,
	`{"type":"array","items":{"type":"number","minimum":0.5,"maximum":2.5},"minItems":2,"maxItems":5}`,
	`{"type":"string","pattern":"^(ab|cd)+[0-9]?$","maxLength":12}`,
	`{"enum":["red","green",1,2.5,null,true,{"a":1},[1,2]]}`,
	`{"anyOf":[{"type":"object","properties":{"k":{"const":"a"},"v":{"type":"integer"}},"required":["k","v"],"additionalProperties":false},{"type":"object","properties":{"k":{"const":"b"},"w":{"type":"boolean"}},"required":["k","w"],"additionalProperties":false}]}`,
	`{"type":"object","additionalProperties":{"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":10}}`,
	`{"type":"string","format":"date"}`,
	`{"type":"string","format":"uuid"}`,
	`{"type":"string","minLength":3,"maxLength":5,"pattern":"é|ü"}`,
	`{"$defs":{"pt":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"],"additionalProperties":false}},"type":"array","items":{"$ref":"#/$defs/pt"},"maxItems":3}`,
	`{"type":["integer","string","null"],"maximum":-3,"maxLength":2}`,
	`{"type":"number","minimum":-1e-3,"exclusiveMaximum":0.002}`,
	`{"type":"integer","minimum":1000000,"maximum":1000010}`,
	`{}`,
	`{"type":"object","properties":{"s":{"type":"string","pattern":"a"}},"required":["s"],"additionalProperties":false}`,
	`{"type":"string","pattern":"^\\d{2,3}$"}`,
}

func TestRandomWalksAreValid(t *testing.T) {
	v, _ := qwen(t)
	for i, schema := range propertySchemas {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			g, err := JSONSchema([]byte(schema), v)
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			s := validator(t, schema)
			done := 0
			for seed := range 12 {
				rng := rand.New(rand.NewPCG(uint64(seed), uint64(i)))
				text, _, ok := randomWalk(t, g, rng, 600, 0.5)
				if !ok {
					continue
				}
				done++
				checkValid(t, s, text)
				if seed == 0 {
					t.Logf("%s", text)
				}
			}
			if done < 6 {
				t.Errorf("only %d of 12 walks ended within the cap", done)
			}
		})
	}
}
