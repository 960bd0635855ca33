package runtime_test

import (
	"errors"
	"strings"
	"testing"
	"unsafe"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/runtime"
	"github.com/google/go-cmp/cmp"
)

func TestLaunchShape(t *testing.T) {
	for _, tt := range []struct {
		name        string
		l           plan.Launch
		grid, block [3]uint32
		err         string
	}{
		{"padded", plan.Launch{Grid: []int{4}, Block: []int{256}}, [3]uint32{4, 1, 1}, [3]uint32{256, 1, 1}, ""},
		{"three dimensions", plan.Launch{Grid: []int{2, 3, 5}, Block: []int{8, 4, 2}}, [3]uint32{2, 3, 5}, [3]uint32{8, 4, 2}, ""},
		{"no block", plan.Launch{Grid: []int{1}}, [3]uint32{}, [3]uint32{}, "want 1 to 3 dimensions each"},
		{"empty grid dimension", plan.Launch{Grid: []int{4, 0}, Block: []int{32}}, [3]uint32{}, [3]uint32{}, "grid [4 0] has an empty dimension"},
		{"negative shared", plan.Launch{Grid: []int{1}, Block: []int{32}, SharedBytes: -1}, [3]uint32{}, [3]uint32{}, "negative shared memory"},
		{"clusters", plan.Launch{Grid: []int{6, 2}, Block: []int{256}, Cluster: 2}, [3]uint32{6, 2, 1}, [3]uint32{256, 1, 1}, ""},
		{"cluster past the grid", plan.Launch{Grid: []int{5, 2}, Block: []int{256}, Cluster: 2}, [3]uint32{}, [3]uint32{}, "clusters of 2 blocks do not divide grid [5 2]"},
		{"negative cluster", plan.Launch{Grid: []int{4}, Block: []int{256}, Cluster: -2}, [3]uint32{}, [3]uint32{}, "clusters of -2 blocks"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			grid, block, err := runtime.LaunchShape(&tt.l)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([2][3]uint32{tt.grid, tt.block}, [2][3]uint32{grid, block}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestKernelArgs(t *testing.T) {
	k := &plan.Kernel{Name: "add_x", Family: "add", Params: ir.Params{Ints: map[string]int64{"width": 8}}}
	mem := struct{ runtime.Mem }{}
	addr := func(r runtime.Ref) (uint64, error) {
		if r.Offset < 0 {
			return 0, errors.New("bad ref")
		}
		return 0x1000 + uint64(r.Offset), nil
	}
	args := []runtime.Ref{{Mem: mem}, {Mem: mem, Offset: 64}}
	got, err := runtime.KernelArgs(k, args, 3, 0xb10c, addr)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]uint64{0x1000, 0x1040, 3, 0xb10c}, got); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
	for _, tt := range []struct {
		name string
		k    *plan.Kernel
		args []runtime.Ref
		err  string
	}{
		{"unknown family", &plan.Kernel{Name: "x", Family: "mystery"}, args, `kernel x: unknown kernel family "mystery"`},
		{"count", k, args[:1], "kernel add_x: 1 arguments, family add takes 2 operands"},
		{"misaligned", k, []runtime.Ref{{Mem: mem}, {Mem: mem, Offset: 4}}, "argument 1 (y) at offset 4 is not 16-byte aligned"},
		{"unresolved", k, []runtime.Ref{{Mem: mem, Offset: -16}, {Mem: mem}}, "argument 0 (x): bad ref"},
	} {
		if _, err := runtime.KernelArgs(tt.k, tt.args, 1, 0, addr); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.err)
		}
	}
}

func TestPackArgs(t *testing.T) {
	block := make([]uint64, 2*runtime.MaxKernelArgs)
	pinned := unsafe.Pointer(&block[0])
	ptrs := runtime.PackArgs(pinned, []uint64{7, 9})
	if uintptr(ptrs) != uintptr(pinned)+8*runtime.MaxKernelArgs {
		t.Fatalf("pointer array at +%d", uintptr(ptrs)-uintptr(pinned))
	}
	for i, want := range []uint64{7, 9} {
		p := block[runtime.MaxKernelArgs+i]
		if p != uint64(uintptr(pinned))+uint64(8*i) || block[i] != want {
			t.Errorf("slot %d: value %d, pointer %#x", i, block[i], p)
		}
	}
}
