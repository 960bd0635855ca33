package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/aimaproject/aimac/server"
)

func chatTemplateCmd() *cobra.Command {
	var dir, request string
	var thinking, ids bool
	c := &cobra.Command{
		Use:   "chat-template",
		Short: "Print the prompt a chat-completions request renders to, as serve renders it",
		Long: `Read a /v1/chat/completions request body (JSON, from --request or stdin),
render it with the checkpoint's chat template through the server's own path
(tools, tool_choice, chat_template_kwargs, thinking), and print the prompt the
engine would be given; the token count goes to stderr. --ids prints the token
ids instead, as a JSON array.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return fmt.Errorf("--model-dir is required")
			}
			var body []byte
			var err error
			if request == "-" {
				body, err = io.ReadAll(cmd.InOrStdin())
			} else {
				body, err = os.ReadFile(request)
			}
			if err != nil {
				return fmt.Errorf("--request: %w", err)
			}
			tok, tmpl, _, err := readModelFiles(dir)
			if err != nil {
				return err
			}
			srv := server.New(server.Config{DisableThinking: !thinking})
			p, apiErr := srv.RenderChat(&server.Model{Tokenizer: tok, Template: tmpl, VocabLimit: tok.Size()}, body)
			if apiErr != nil {
				return fmt.Errorf("the request: %v", apiErr)
			}
			if ids {
				out := p.IDs
				if out == nil {
					out = []int32{}
				}
				return json.NewEncoder(cmd.OutOrStdout()).Encode(out)
			}
			fmt.Fprint(cmd.OutOrStdout(), p.Text)
			fmt.Fprintf(cmd.ErrOrStderr(), "%d tokens\n", len(p.IDs))
			return nil
		},
	}
	c.Flags().StringVar(&dir, "model-dir", "", "checkpoint `DIR` whose tokenizer and chat template render (required)")
	c.Flags().StringVar(&request, "request", "-", "chat-completions request `FILE` (- for stdin)")
	c.Flags().BoolVar(&thinking, "enable-thinking", true, "think before answering unless the request says otherwise (as serve's flag)")
	c.Flags().BoolVar(&ids, "ids", false, "print the prompt's token ids as a JSON array instead of its text")
	return c
}
