package kernels

import (
	"errors"
	"fmt"

	"github.com/aimaproject/aimac/ir"
)

// The item table of a decode_persistent launch, in 64-bit words (written
// by the runtime once per run, read by the kernel's blocks):
//
//	[0] the run's launches L, [1] its items (the launches' blocks in all)
//	then per launch i, at PersistentHeader + i·PersistentRecord:
//	  [0] the member (index into the kernel's Members), [1] grid x,
//	  [2] grid y, [3] its first item, [4…] the entry point's arguments as
//	  the launch passes them (operand addresses, then n, then the
//	  parameter block's address: KernelABI).
//
// The sync block beside it is int32 counters, 0 between launches: [0] the
// next item, [1] the blocks that have left, [2 + i] launch i's items done.
// The last block to leave zeroes it again, so graph replays reuse it.
const (
	PersistentHeader = 2
	PersistentArgs   = 28 // an entry point's arguments a record holds
	PersistentRecord = 4 + PersistentArgs
)

// MaxPersistentLaunches bounds a run's launches (a block keeps each one's
// first item in shared memory: 4 bytes a launch).
const MaxPersistentLaunches = 4096

// PersistentSyncInts is the sync block's int32 counters for a run of
// launches.
func PersistentSyncInts(launches int) int { return 2 + launches }

// PersistentTableWords is the item table's 64-bit words for a run of
// launches.
func PersistentTableWords(launches int) int { return PersistentHeader + launches*PersistentRecord }

// persistentKinds are the families whose entry points may run as items of
// a decode_persistent launch. Each was read for the two things an item
// cannot do that a launch can: wait for another block of its own launch
// (a grid barrier, a peer's flag: the items of one launch need not be
// running at once), and return from some of a block's warps before a
// block barrier that the others then reach (an exited warp leaves a
// launch's barrier count; an item's warp that returns waits in the
// persistent loop instead). Returns before a barrier are the whole
// block's (rows past n, a key head's last block).
var persistentKinds = map[ir.Kind]bool{
	ir.Embedding:             true,
	ir.GEMV:                  true,
	ir.GEMVAdd:               true,
	ir.RMSNormGEMV:           true,
	ir.RMSNormRouterTopK:     true,
	ir.GDNDecodeSplit:        true,
	ir.MoEDecodeGateUp:       true,
	ir.MoEDecodeGateUpRanked: true,
	ir.MoEDecodeDown:         true,
	ir.QKNormRoPEAppend:      true,
	ir.AttentionCombineGate:  true,
	ir.LMHeadInt8:            true,
	ir.LMHeadCertify:         true,
	ir.LMHeadPick:            true,
	ir.RMSNormLMHeadInt8:     true,
	ir.RMSNormLMHeadCertify:  true,
}

// Persistent reports whether kind's entry point may run as an item of a
// decode_persistent launch.
func Persistent(kind ir.Kind) bool { return persistentKinds[kind] }

// decodePersistent is the family of the persistent launches: two operands,
// the item table and the sync block, and no parameters; what it runs is
// the plan kernel's Members. Its source is composed from theirs (codegen's
// RenderPersistent), and it has no reference: an engine that does not run
// it runs its launches one by one, the oracle.
func decodePersistent() *ir.Family {
	return &ir.Family{
		Kind: ir.DecodePersistent,
		// max_launches: the longest run of launches it runs (its blocks keep
		// each launch's first item in shared memory).
		Params: ir.Ints("max_launches"),
		Check: func(p ir.Params) error {
			if n := p.Int("max_launches"); n < 2 || n > MaxPersistentLaunches {
				return fmt.Errorf("max_launches %d: want 2 to %d", n, MaxPersistentLaunches)
			}
			return nil
		},
		// The operands are the engine's, not the plan's buffers: their extents
		// are the header's words and counters, what every run has at least
		// (the rest is PersistentTableWords and PersistentSyncInts of the run).
		Operands: []ir.OperandSpec{
			{Name: "table", DType: ir.I32, Access: ir.Read, Extent: ir.Const(2 * PersistentHeader)},
			{Name: "sync", DType: ir.I32, Access: ir.ReadWrite, Extent: ir.Const(2)},
		},
		// One block here: the engine launches each run on min(its items, the
		// blocks the device holds at once).
		Launch: func(_ ir.Params, _ int, c ir.LaunchConfig) ir.LaunchShape { return c.Blocks(1, 1, 1) },
		Reference: func(*ir.Args) error {
			return errors.New("decode_persistent has no reference: its launches run one by one instead")
		},
	}
}
