package server

import (
	"container/list"
	"sync"

	"github.com/aimaproject/aimac/openai"
)

// stored is a Responses API object and the conversation it ends, so a
// later request can continue it with previous_response_id.
type stored struct {
	response     any
	conversation []openai.Message
}

// store is a bounded LRU of stored responses.
type store struct {
	mu    sync.Mutex
	limit int
	order *list.List // front: most recent
	byID  map[string]*list.Element
}

type storeEntry struct {
	id string
	v  stored
}

func newStore(limit int) *store {
	return &store{limit: limit, order: list.New(), byID: map[string]*list.Element{}}
}

func (s *store) put(id string, v stored) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.byID[id]; ok {
		e.Value.(*storeEntry).v = v
		s.order.MoveToFront(e)
		return
	}
	s.byID[id] = s.order.PushFront(&storeEntry{id, v})
	for s.order.Len() > s.limit {
		old := s.order.Back()
		s.order.Remove(old)
		delete(s.byID, old.Value.(*storeEntry).id)
	}
}

func (s *store) get(id string) (stored, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byID[id]
	if !ok {
		return stored{}, false
	}
	s.order.MoveToFront(e)
	return e.Value.(*storeEntry).v, true
}

func (s *store) delete(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byID[id]
	if ok {
		s.order.Remove(e)
		delete(s.byID, id)
	}
	return ok
}

func (s *store) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order.Len()
}
