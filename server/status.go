package server

import (
	"net/http"
	"net/url"

	"github.com/go-chi/chi/v5"

	"github.com/aimaproject/aimac/openai"
)

// health is liveness: always 200, with the model and queue counters.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	st := s.queue.Stats()
	body := map[string]any{
		"status":        "ok",
		"ready":         s.ready.Load(),
		"shutting_down": s.shuttingDown.Load(),
		"queue": map[string]any{
			"waiting": st.Waiting, "running": st.Running, "depth": s.cfg.QueueDepth,
			"admitted": st.Admitted, "rejected": st.Rejected, "timed_out": st.TimedOut, "cancelled": st.Cancelled,
		},
	}
	if m := s.currentModel(); m != nil {
		body["model"] = m.ID
		body["context_tokens"] = m.Engine.Capacity()
		body["target"] = m.Target
	} else {
		body["status"] = "loading"
	}
	writeJSON(w, http.StatusOK, body)
}

// readyz is 200 once the model is loaded and warmed.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if !s.ready.Load() || s.shuttingDown.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ready": true})
}

func (s *Server) modelCard(m *Model) openai.ModelCard {
	return openai.NewModelCard(m.ID, "aima-engine", s.created, m.Engine.Capacity())
}

func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	var cards []openai.ModelCard
	if m := s.currentModel(); m != nil {
		cards = append(cards, s.modelCard(m))
	}
	writeJSON(w, http.StatusOK, openai.NewModelList(cards...))
}

func (s *Server) getModel(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "*")
	if r.URL.RawPath != "" {
		// chi routed the escaped path (clients send "a%2Fb" for "a/b").
		if u, err := url.PathUnescape(id); err == nil {
			id = u
		}
	}
	m := s.currentModel()
	if m == nil || m.ID != id {
		writeError(w, openai.ModelNotFound(id))
		return
	}
	writeJSON(w, http.StatusOK, s.modelCard(m))
}

// serving returns the model if a request for model id can be served.
func (s *Server) serving(id string) (*Model, *openai.Error) {
	if s.shuttingDown.Load() {
		return nil, openai.ShuttingDown()
	}
	m := s.currentModel()
	if m == nil {
		return nil, &openai.Error{Status: http.StatusServiceUnavailable, Message: "the model is still loading", Type: "server_error", Code: "model_loading"}
	}
	if id != m.ID {
		return nil, openai.ModelNotFound(id)
	}
	return m, nil
}

// servingOptional is serving for endpoints where the model may be left out.
func (s *Server) servingOptional(id string) (*Model, *openai.Error) {
	if id == "" {
		if m := s.currentModel(); m != nil {
			id = m.ID
		}
	}
	return s.serving(id)
}
