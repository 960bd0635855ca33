package server

import "testing"

func TestStoreEvictsLeastRecent(t *testing.T) {
	s := newStore(2)
	s.put("a", stored{response: 1})
	s.put("b", stored{response: 2})
	if _, ok := s.get("a"); !ok { // a is now the most recent
		t.Fatal("a missing")
	}
	s.put("c", stored{response: 3})
	if _, ok := s.get("b"); ok {
		t.Error("b should have been evicted")
	}
	for _, id := range []string{"a", "c"} {
		if _, ok := s.get(id); !ok {
			t.Errorf("%s evicted", id)
		}
	}
	if !s.delete("a") || s.delete("a") || s.len() != 1 {
		t.Error("delete")
	}
}
