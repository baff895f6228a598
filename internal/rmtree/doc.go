// Package rmtree removes a directory tree that a sandbox wrote: a released
// workspace, a session's caches, a pruned shared cache.
//
// Such a tree is the sandbox's choice, so the removal never follows a
// link out of it, takes a directory the sandbox made unreadable or
// unwritable (its owner's bits are added, on a descriptor of the
// directory itself), and costs time linear in its entries and a bounded
// number of descriptors whatever its depth: past MaxDepth a directory is
// renamed up to the top of the tree being removed (the same file system)
// instead of descended into. os.RemoveAll holds a descriptor per level
// (a tree deeper than the descriptor limit was left on disk for good),
// and a walk by paths through an os.Root resolves every path from the
// top (quadratic: a chain of 4000 directories took 97 s; one of 30000 would take
// about an hour and a half).
package rmtree
