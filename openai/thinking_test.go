package openai

import "testing"

func TestThinkingBudget(t *testing.T) {
	tests := []struct {
		body    string
		n       int
		limited bool
	}{
		{``, 0, false},
		{`,"reasoning_effort":"none"`, 0, false}, // thinking off instead
		{`,"reasoning_effort":"minimal"`, 256, true},
		{`,"reasoning_effort":"low"`, 1024, true},
		{`,"reasoning_effort":"medium"`, 4096, true},
		{`,"reasoning_effort":"high"`, 16384, true},
		{`,"reasoning_effort":"high","thinking_budget":7`, 7, true},
		{`,"thinking_budget":0`, 0, true},
	}
	for _, tt := range tests {
		r, err := DecodeChatRequest([]byte(chatBody(tt.body)))
		if err != nil {
			t.Fatalf("%s: %v", tt.body, err)
		}
		if n, limited := r.ThinkingBudget(); n != tt.n || limited != tt.limited {
			t.Errorf("chat %s: budget %d %v, want %d %v", tt.body, n, limited, tt.n, tt.limited)
		}
	}
	r, err := DecodeResponsesRequest([]byte(`{"model":"m","input":"x","reasoning":{"effort":"low"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if n, limited := r.ThinkingBudget(); n != 1024 || !limited {
		t.Errorf("responses reasoning.effort low: %d %v", n, limited)
	}
	r, err = DecodeResponsesRequest([]byte(`{"model":"m","input":"x","reasoning":{"effort":"low"},"thinking_budget":9}`))
	if err != nil {
		t.Fatal(err)
	}
	if n, limited := r.ThinkingBudget(); n != 9 || !limited {
		t.Errorf("responses thinking_budget 9: %d %v", n, limited)
	}
}
