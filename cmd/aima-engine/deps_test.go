package main

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/aimaproject/aimac"

// compilerPackages are the compiler's packages the serving binary must not
// link: an engine runs bundles of compiled code objects and never renders
// or compiles a kernel.
var compilerPackages = []string{module + "/codegen", module + "/hipcc", module + "/bundler"}

// importGraph is `go list -deps` of pkg: every package it links, with its
// imports (tests excluded), and pkg's own import path.
func importGraph(t *testing.T, pkg string) (graph map[string][]string, root string) {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("listing the engine's dependencies needs the go command: %v", err)
	}
	out, err := exec.Command(goCmd, "list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", pkg).Output()
	if err != nil {
		var ee *exec.ExitError
		errors.As(err, &ee)
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr(ee))
	}
	graph = map[string][]string{}
	for line := range strings.Lines(strings.TrimSpace(string(out))) {
		f := strings.Fields(line)
		graph[f[0]] = f[1:]
		root = f[0] // -deps lists a package after everything it imports
	}
	return graph, root
}

func stderr(e *exec.ExitError) string {
	if e == nil {
		return ""
	}
	return string(e.Stderr)
}

// importChain is a shortest chain of imports from root to pkg, or nil.
func importChain(graph map[string][]string, root, pkg string) []string {
	prev := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == pkg {
			var chain []string
			for ; p != ""; p = prev[p] {
				chain = append(chain, strings.TrimPrefix(p, module+"/"))
			}
			slices.Reverse(chain)
			return chain
		}
		for _, q := range graph[p] {
			if _, seen := prev[q]; !seen {
				prev[q] = p
				queue = append(queue, q)
			}
		}
	}
	return nil
}

// TestEngineLinksNoCompiler: aima-engine links the bundle format but
// neither the code generator nor the device-compiler driver; a regression
// names the chain of imports that brings one in.
func TestEngineLinksNoCompiler(t *testing.T) {
	graph, root := importGraph(t, ".")
	if root != module+"/cmd/aima-engine" {
		t.Fatalf("go list -deps . ends with %s, not the engine", root)
	}
	if importChain(graph, root, module+"/bundle") == nil {
		t.Errorf("aima-engine does not link %s/bundle: how does it open bundles?", module)
	}
	for _, pkg := range compilerPackages {
		if chain := importChain(graph, root, pkg); chain != nil {
			t.Errorf("aima-engine links the compiler's %s: %s", strings.TrimPrefix(pkg, module+"/"), strings.Join(chain, " → "))
		}
	}
}

// TestImportChain: the check above sees the compiler where it is linked,
// in aimac itself.
func TestImportChain(t *testing.T) {
	graph, root := importGraph(t, "../aimac")
	for _, pkg := range compilerPackages {
		chain := importChain(graph, root, pkg)
		if len(chain) < 2 || chain[0] != "cmd/aimac" || chain[len(chain)-1] != strings.TrimPrefix(pkg, module+"/") {
			t.Errorf("aimac → %s: chain %v", pkg, chain)
		}
	}
}
