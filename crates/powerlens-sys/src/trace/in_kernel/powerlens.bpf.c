// SPDX-License-Identifier: MIT OR Apache-2.0 OR GPL-2.0
//
// powerlens's in-kernel collection: the scheduler's three busiest tracepoints, written
// as compact records to a BPF ring buffer per CPU instead of a perf record each.
//
// - sched_switch: one record per switch, which also carries the CPU time the thread
//   switching out ran since its last runtime record (below).
// - sched_waking: one record per wake-up.
// - Sampled stacks: at most one switch and one wake-up per CPU every `stack_interval`
//   nanoseconds (every one while they are rarer) carries the current thread's user
//   registers and a copy of the top of its user stack, which the recorder unwinds as it
//   does a perf sample's.
// - sched_stat_runtime: the scheduler's CPU-time updates (a few per switch) are summed
//   per CPU in a map, not written: the sum goes out with the next switch of that thread
//   (in its switch record, or as a runtime record when switches are not collected here),
//   or as a runtime record of its own when another thread's update comes first (a
//   wake-up updates the target CPU's current thread from this CPU), or once it has run
//   FLUSH_NS without switching. The recorder reads what is left in the sums at the end.
//
// Built with clang alone (no kernel or libbpf headers): the kernel structures are
// declared here with only the fields read, and clang's CO-RE relocations
// (preserve_access_index) let the loader find them in the running kernel's BTF.
// Rebuild with scripts/build-bpf.sh; the object is committed beside this file.

typedef unsigned char __u8;
typedef unsigned int __u32;
typedef int __s32;
typedef unsigned long long __u64;
typedef long long __s64;

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int(*name)[val]
#define __type(name, val) typeof(val) *name
#define __array(name, val) typeof(val) *name[]

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static __u64 (*bpf_ktime_get_ns)(void) = (void *)5;
static __u32 (*bpf_get_smp_processor_id)(void) = (void *)8;
static __u64 (*bpf_get_current_pid_tgid)(void) = (void *)14;
static void *(*bpf_ringbuf_reserve)(void *ringbuf, __u64 size, __u64 flags) = (void *)131;
static void (*bpf_ringbuf_submit)(void *data, __u64 flags) = (void *)132;
static __u64 (*bpf_ringbuf_query)(void *ringbuf, __u64 flags) = (void *)134;
static long (*bpf_probe_read_user)(void *dst, __u32 size, const void *unsafe_ptr) = (void *)112;
static long (*bpf_ringbuf_output)(void *ringbuf, void *data, __u64 size, __u64 flags) = (void *)130;
static struct task_struct *(*bpf_get_current_task_btf)(void) = (void *)158;
static struct pt_regs *(*bpf_task_pt_regs)(struct task_struct *task) = (void *)175;

#define BPF_RB_NO_WAKEUP 1
#define BPF_RB_FORCE_WAKEUP 2
#define BPF_RB_AVAIL_DATA 0
#define BPF_RB_RING_SIZE 1

struct thread_info {
    __u32 cpu;
} __attribute__((preserve_access_index));

struct pt_regs {
    unsigned long bp;
    unsigned long ip;
    unsigned long sp;
} __attribute__((preserve_access_index));

struct task_struct {
    struct thread_info thread_info;
    unsigned int flags;
    int exit_state;
    int pid;
    int tgid;
    void *thread_pid;
    char comm[16];
} __attribute__((preserve_access_index));

char LICENSE[] SEC("license") = "Dual MIT/GPL";

// Record kinds: the first word after the time.
#define KIND_SWITCH 1
#define KIND_WAKING 2
#define KIND_RUNTIME 3

// What is switched on, by the recorder (index: KIND_*); 0 = off.
struct {
    __uint(type, 2 /* BPF_MAP_TYPE_ARRAY */);
    __uint(max_entries, 4);
    __type(key, __u32);
    __type(value, __u32);
} control SEC(".maps");

// The recorder's settings: [0] the least time between two stacks of one kind on one CPU
// (ns; 0: every event, ~0: none), [1] the user-stack bytes to copy (at most MAX_STACK).
struct {
    __uint(type, 2 /* BPF_MAP_TYPE_ARRAY */);
    __uint(max_entries, 2);
    __type(key, __u32);
    __type(value, __u64);
} config SEC(".maps");

#define CONFIG_STACK_INTERVAL 0
#define CONFIG_STACK_BYTES 1
#define MAX_STACK 4096
#define PF_KTHREAD 0x00200000

// Per CPU and stacked kind (0: switch, 1: waking): a token bucket of stacks — credit in
// nanoseconds, earned with time up to STACK_BURST stacks' worth, one stack costing the
// interval — so that the stacks average at most one per interval and a burst of events
// after a quiet stretch still gets its stacks; when it was last topped up, the events
// since the last stack, and the most events one stack stood for (the recorder's "1 in N").
struct stack_pace {
    __u64 last_ns[2];
    __u64 credit_ns[2];
    __u64 since[2];
    __u64 max_period[2];
};

#define STACK_BURST 100

struct {
    __uint(type, 6 /* BPF_MAP_TYPE_PERCPU_ARRAY */);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct stack_pace);
} stack_paces SEC(".maps");

// Where a record with a stack is put together before it is written (too large for the
// BPF stack, and of a size known only once the stack is copied).
struct scratch {
    __u8 bytes[128 + 32 + MAX_STACK];
};

struct {
    __uint(type, 6 /* BPF_MAP_TYPE_PERCPU_ARRAY */);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct scratch);
} scratches SEC(".maps");

// One CPU's unwritten CPU time: the thread it belongs to, and the sum.
struct runtime_sum {
    __u32 tid;
    __u32 pad;
    __u64 ns;
};

struct {
    __uint(type, 6 /* BPF_MAP_TYPE_PERCPU_ARRAY */);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct runtime_sum);
} runtime_sums SEC(".maps");

// Records that found the ring full, per CPU.
struct {
    __uint(type, 6 /* BPF_MAP_TYPE_PERCPU_ARRAY */);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, __u64);
} lost SEC(".maps");

// The rings, one per CPU: a program writes to its own CPU's, so that two CPUs never
// contend for one ring's lock and positions. One shared ring cost an event about 300 ns
// on a load busy on two CPUs here, against 115 ns on one (docs/COLLECTOR.md). The
// recorder creates the rings, each of the size it chooses, and puts them in at load; a
// CPU it has no ring for (one brought online after the start) counts its records lost.
struct ring {
    __uint(type, 27 /* BPF_MAP_TYPE_RINGBUF */);
    __uint(max_entries, 1 << 16);
};

struct {
    __uint(type, 12 /* BPF_MAP_TYPE_ARRAY_OF_MAPS */);
    __uint(max_entries, 1);
    __type(key, __u32);
    __array(values, struct ring);
} rings SEC(".maps");

// Every record starts so: when, where, and the thread that was current (as a perf
// sample's header: process and thread id; 0 for the idle task).
struct head {
    __u64 time_ns;
    __u32 kind;
    __u32 cpu;
    __u32 pid;
    __u32 tid;
};

// The runtime part of a record: the layout of the runtime format's payload.
struct runtime_part {
    __u32 tid;
    __u32 pad;
    __u64 ns;
};

struct switch_record {
    struct head head;
    // sched_switch's payload, as the recorder's format for it says.
    char prev_comm[16];
    __s32 prev_pid;
    __s32 next_pid;
    __s64 prev_state;
    char next_comm[16];
    // The CPU time prev ran since its last runtime record (ns 0: none).
    struct runtime_part runtime;
};

struct waking_record {
    struct head head;
    char comm[16];
    __s32 pid;
    __s32 target_cpu;
};

struct runtime_record {
    struct head head;
    struct runtime_part runtime;
};

// What follows a switch or waking record that carries its stack: the thread's user
// registers where it entered the kernel, and `bytes` of its user stack from sp up.
struct stack_part {
    __u64 ip;
    __u64 sp;
    __u64 bp;
    __u32 bytes;
    __u32 pad;
    __u8 stack[MAX_STACK];
};

// A thread that runs this much CPU time without switching still has it written.
#define FLUSH_NS 4000000ULL

static __u32 enabled(__u32 kind)
{
    __u32 *on = bpf_map_lookup_elem(&control, &kind);
    return on && *on;
}

// Counts a record that found no room (or no ring) on this CPU.
static void count_lost(void)
{
    __u32 zero = 0;
    __u64 *n = bpf_map_lookup_elem(&lost, &zero);
    if (n)
        *n += 1;
}

// This CPU's ring; NULL (the record counted lost) when it has none.
static void *this_ring(void)
{
    __u32 cpu = bpf_get_smp_processor_id();
    void *ring = bpf_map_lookup_elem(&rings, &cpu);
    if (!ring)
        count_lost();
    return ring;
}

// Reserves a record in `ring`; counts a loss when it is full.
static void *reserve(void *ring, __u64 size)
{
    void *r = bpf_ringbuf_reserve(ring, size, 0);
    if (!r)
        count_lost();
    return r;
}

// Whether a record should wake the reader: once, as it takes the ring past half full (a
// perf ring's watermark does the same). A wake-up per record would double the work, and
// one for every record past half full cost each about 6 µs here while a reader that had
// fallen behind let the ring fill. A reader never misses data for it: a poll of a ring
// that holds any returns at once. `before` is what the ring held before this record,
// `bytes` the record with its 8-byte header.
static __u64 wakeup_flag(void *ring, __u64 before, __u64 bytes)
{
    __u64 half = bpf_ringbuf_query(ring, BPF_RB_RING_SIZE) / 2;
    return before <= half && before + bytes > half ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

// Submits a reserved record of `size` bytes (the ring's count of what it holds already
// includes it).
static void submit(void *ring, void *r, __u64 size)
{
    __u64 bytes = ((size + 7) & ~7ULL) + 8;
    __u64 held = bpf_ringbuf_query(ring, BPF_RB_AVAIL_DATA);
    bpf_ringbuf_submit(r, wakeup_flag(ring, held - bytes, bytes));
}

static void fill_head(struct head *h, __u32 kind, __u64 now)
{
    __u64 id = bpf_get_current_pid_tgid();
    h->time_ns = now;
    h->kind = kind;
    h->cpu = bpf_get_smp_processor_id();
    h->pid = id >> 32;
    h->tid = (__u32)id;
}

// Two 8-byte loads and stores, where a byte loop took 32 instructions.
static void copy_comm(char *to, const char *from)
{
    __builtin_memcpy(to, from, 16);
}

static __u64 setting(__u32 index)
{
    __u64 *value = bpf_map_lookup_elem(&config, &index);
    return value ? *value : 0;
}

// Whether this event of `kind` (0: switch, 1: waking) on this CPU takes its stack.
static int takes_stack(__u32 kind, __u64 now)
{
    __u64 interval = setting(CONFIG_STACK_INTERVAL);
    if (interval == ~0ULL)
        return 0;
    __u32 zero = 0;
    struct stack_pace *pace = bpf_map_lookup_elem(&stack_paces, &zero);
    if (!pace || kind > 1)
        return 0;
    pace->since[kind] += 1;
    __u64 cap = interval * STACK_BURST;
    __u64 credit = pace->credit_ns[kind] + (now - pace->last_ns[kind]);
    pace->last_ns[kind] = now;
    if (credit > cap)
        credit = cap;
    if (credit < interval) {
        pace->credit_ns[kind] = credit;
        return 0;
    }
    pace->credit_ns[kind] = credit - interval;
    if (pace->since[kind] > pace->max_period[kind])
        pace->max_period[kind] = pace->since[kind];
    pace->since[kind] = 0;
    return 1;
}

// Fills `part` with the current thread's user registers and stack; returns its size,
// or 0 for a kernel thread (no user stack). A copy that runs past the end of the stack
// fails as a whole: it is tried again at half the size, three times.
static __u32 add_stack(struct stack_part *part)
{
    struct task_struct *task = bpf_get_current_task_btf();
    if (task->flags & PF_KTHREAD)
        return 0;
    struct pt_regs *regs = bpf_task_pt_regs(task);
    if (!regs)
        return 0;
    part->ip = regs->ip;
    part->sp = regs->sp;
    part->bp = regs->bp;
    part->pad = 0;
    __u64 want = setting(CONFIG_STACK_BYTES);
    __u64 got = 0;
    for (int i = 0; i < 4; i++) {
        // Checked where it is used, so that the verifier sees the bound.
        if (want == 0 || want > MAX_STACK)
            break;
        if (bpf_probe_read_user(part->stack, want, (void *)part->sp) == 0) {
            got = want;
            break;
        }
        want >>= 1;
    }
    part->bytes = got;
    return 32 + got;
}

// Writes a record put together in the scratch buffer: `fixed` bytes of the event's own
// record and `stack` of its stack part.
static void output(void *record, __u64 fixed, __u32 stack)
{
    __u64 size = fixed + stack;
    if (size > sizeof(struct scratch))
        return;
    void *ring = this_ring();
    if (!ring)
        return;
    __u64 held = bpf_ringbuf_query(ring, BPF_RB_AVAIL_DATA);
    if (bpf_ringbuf_output(ring, record, size, wakeup_flag(ring, held, ((size + 7) & ~7ULL) + 8)))
        count_lost();
}

// The scratch buffer an event's record with its stack is put together in, when this
// event takes its stack; NULL when it does not (its record goes straight to the ring).
static void *stacked_record(__u32 kind, __u64 now)
{
    if (!takes_stack(kind, now))
        return 0;
    __u32 zero = 0;
    struct scratch *buf = bpf_map_lookup_elem(&scratches, &zero);
    return buf ? buf->bytes : 0;
}

// Writes a record put together in the scratch buffer, `size` bytes, with its stack.
static void output_stacked(void *r, __u64 size)
{
    output(r, size, add_stack((struct stack_part *)((__u8 *)r + size)));
}

// Writes `sum` as a runtime record of its own and empties it.
static void write_sum(struct runtime_sum *sum, __u64 now)
{
    void *ring = this_ring();
    struct runtime_record *r = ring ? reserve(ring, sizeof(*r)) : 0;
    if (r) {
        fill_head(&r->head, KIND_RUNTIME, now);
        r->runtime.tid = sum->tid;
        r->runtime.pad = 0;
        r->runtime.ns = sum->ns;
        submit(ring, r, sizeof(*r));
    }
    sum->ns = 0;
}

SEC("tp_btf/sched_stat_runtime")
int on_runtime(__u64 *ctx)
{
    if (!enabled(KIND_RUNTIME))
        return 0;
    struct task_struct *task = (void *)ctx[0];
    __u64 ns = ctx[1];
    __u32 zero = 0;
    struct runtime_sum *sum = bpf_map_lookup_elem(&runtime_sums, &zero);
    if (!sum)
        return 0;
    __u32 tid = task->pid;
    // The clock is read only to write a record: most updates only add.
    if (sum->tid != tid) {
        if (sum->ns)
            write_sum(sum, bpf_ktime_get_ns());
        sum->tid = tid;
    }
    sum->ns += ns;
    if (sum->ns >= FLUSH_NS)
        write_sum(sum, bpf_ktime_get_ns());
    return 0;
}

// sched_switch's prev_state as the tracepoint reports it (TASK_REPORT): 0x100 for a
// preempted task (R+), the exit states for a dying one, else the task's own state bits.
static __s64 reported_state(int preempt, __u32 state, int exit_state)
{
    if (preempt)
        return 0x100;
    __u32 s = (state | exit_state) & 0x7f;
    if (s & 0x30)
        return s & 0x30;
    return s;
}

static __attribute__((always_inline)) void fill_switch(struct switch_record *r, __u64 now, int preempt,
    struct task_struct *prev, struct task_struct *next, __u32 prev_state, struct runtime_sum *sum)
{
    __u32 prev_tid = prev->pid;
    fill_head(&r->head, KIND_SWITCH, now);
    // A thread that has exited and been released has no pid left: perf writes -1 then.
    if (!prev->thread_pid) {
        r->head.pid = (__u32)-1;
        r->head.tid = (__u32)-1;
    }
    copy_comm(r->prev_comm, prev->comm);
    r->prev_pid = prev_tid;
    r->next_pid = next->pid;
    r->prev_state = reported_state(preempt, prev_state, prev->exit_state);
    copy_comm(r->next_comm, next->comm);
    r->runtime.tid = prev_tid;
    r->runtime.pad = 0;
    r->runtime.ns = 0;
    if (sum && sum->ns) {
        r->runtime.ns = sum->ns;
        sum->ns = 0;
    }
}

// With switches recorded: a switch record, carrying prev's unwritten CPU time. With only
// the CPU time collected here (switches go through perf, with their stacks): prev's
// unwritten CPU time as a runtime record, so that it is written when prev stops running,
// as the scheduler's own last update would be.
SEC("tp_btf/sched_switch")
int on_switch(__u64 *ctx)
{
    __u32 want_switch = enabled(KIND_SWITCH);
    __u32 want_runtime = enabled(KIND_RUNTIME);
    if (!want_switch && !want_runtime)
        return 0;
    int preempt = (int)(ctx[0] & 1);
    struct task_struct *prev = (void *)ctx[1];
    struct task_struct *next = (void *)ctx[2];
    __u32 prev_state = (__u32)ctx[3];
    __u64 now = bpf_ktime_get_ns();
    __u32 zero = 0;
    struct runtime_sum *sum = want_runtime ? bpf_map_lookup_elem(&runtime_sums, &zero) : 0;
    __u32 prev_tid = prev->pid;
    if (sum && sum->ns && (sum->tid != prev_tid || !want_switch))
        write_sum(sum, now);
    if (!want_switch)
        return 0;
    // Filled by one inlined function in each branch, so that the verifier never sees a
    // ring record and a scratch buffer in one register.
    struct switch_record *r = stacked_record(0, now);
    if (r) {
        fill_switch(r, now, preempt, prev, next, prev_state, sum);
        output_stacked(r, sizeof(*r));
        return 0;
    }
    void *ring = this_ring();
    r = ring ? reserve(ring, sizeof(*r)) : 0;
    if (!r)
        return 0;
    fill_switch(r, now, preempt, prev, next, prev_state, sum);
    submit(ring, r, sizeof(*r));
    return 0;
}

static __attribute__((always_inline)) void fill_waking(struct waking_record *r, __u64 now, struct task_struct *p)
{
    fill_head(&r->head, KIND_WAKING, now);
    copy_comm(r->comm, p->comm);
    r->pid = p->pid;
    r->target_cpu = p->thread_info.cpu;
}

SEC("tp_btf/sched_waking")
int on_waking(__u64 *ctx)
{
    if (!enabled(KIND_WAKING))
        return 0;
    struct task_struct *p = (void *)ctx[0];
    __u64 now = bpf_ktime_get_ns();
    struct waking_record *r = stacked_record(1, now);
    if (r) {
        fill_waking(r, now, p);
        output_stacked(r, sizeof(*r));
        return 0;
    }
    void *ring = this_ring();
    r = ring ? reserve(ring, sizeof(*r)) : 0;
    if (!r)
        return 0;
    fill_waking(r, now, p);
    submit(ring, r, sizeof(*r));
    return 0;
}
