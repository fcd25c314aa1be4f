/* The test program of tests/stacks.rs: named functions that sleep briefly in a loop, spin,
 * and wait on a condition variable signalled by another, each reporting the kernel's own
 * count of its voluntary context switches (getrusage RUSAGE_THREAD) as the oracle. Built
 * with frame pointers; glibc's blocking calls are unwound through its .eh_frame. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
/* Signals not yet consumed: a counter, not a flag, so that two signals arriving before
 * the waiter wakes are not merged into one (the waiter would then wait forever). */
static int pending;
static volatile unsigned long sink;

static long voluntary(void) {
    struct rusage r;
    getrusage(RUSAGE_THREAD, &r);
    return r.ru_nvcsw;
}

__attribute__((noinline)) void short_sleeper(int n) {
    struct timespec ts = {0, 200000};
    for (int i = 0; i < n; i++) nanosleep(&ts, 0);
}

__attribute__((noinline)) void spinner(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) sink += i;
}

__attribute__((noinline)) void condvar_waiter(int n) {
    for (int i = 0; i < n; i++) {
        pthread_mutex_lock(&lock);
        while (pending == 0) pthread_cond_wait(&cond, &lock);
        pending--;
        pthread_mutex_unlock(&lock);
    }
}

__attribute__((noinline)) void condvar_signaller(int n) {
    for (int i = 0; i < n; i++) {
        usleep(1000);
        pthread_mutex_lock(&lock);
        pending++;
        pthread_cond_signal(&cond);
        pthread_mutex_unlock(&lock);
    }
}

static void *waiter_thread(void *arg) {
    long before = voluntary();
    condvar_waiter(100);
    printf("condvar_waiter_voluntary=%ld\n", voluntary() - before);
    return arg;
}

static void *spinner_thread(void *arg) {
    spinner(150000000UL);
    return arg;
}

int main(void) {
    pthread_t waiter, spin;
    pthread_create(&waiter, 0, waiter_thread, 0);
    pthread_create(&spin, 0, spinner_thread, 0);
    long before = voluntary();
    int sleeps = 300;
    short_sleeper(sleeps);
    printf("short_sleeper_voluntary=%ld\n", voluntary() - before);
    printf("short_sleeper_calls=%d\n", sleeps);
    condvar_signaller(100);
    pthread_join(waiter, 0);
    pthread_join(spin, 0);
    return 0;
}
