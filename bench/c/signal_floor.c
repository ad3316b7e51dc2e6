/*
 * The cost of signal-driven sampling itself, without any profiler: a busy
 * loop on one thread, optionally interrupted by SIGPROF from a perf_events
 * cpu-clock counter with an empty handler. Prints loop iterations done in
 * the given time and the number of signals received.
 *
 * usage: signal_floor <period_ns, 0 for no signals> <seconds>
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile long signals;

static void on_signal(int signo, siginfo_t *info, void *context) {
    (void)signo; (void)info; (void)context;
    signals++;
}

static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

int main(int argc, char **argv) {
    long period = argc > 1 ? atol(argv[1]) : 0;
    double seconds = argc > 2 ? atof(argv[2]) : 3;
    if (period > 0) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_sigaction = on_signal;
        action.sa_flags = SA_SIGINFO | SA_RESTART;
        sigaction(SIGPROF, &action, NULL);
        struct perf_event_attr attr;
        memset(&attr, 0, sizeof attr);
        attr.type = PERF_TYPE_SOFTWARE;
        attr.size = sizeof attr;
        attr.config = PERF_COUNT_SW_CPU_CLOCK;
        attr.sample_period = period;
        attr.disabled = 1;
        attr.wakeup_events = 1;
        int fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
        if (fd < 0) { perror("perf_event_open"); return 1; }
        struct f_owner_ex owner = { F_OWNER_TID, (pid_t)syscall(SYS_gettid) };
        fcntl(fd, F_SETFL, O_ASYNC);
        fcntl(fd, F_SETSIG, SIGPROF);
        fcntl(fd, F_SETOWN_EX, &owner);
        ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
    }
    long end = now_ns() + (long)(seconds * 1e9);
    unsigned long x = 1, iterations = 0;
    while (now_ns() < end) {
        for (int i = 0; i < 10000; i++) x = x * 6364136223846793005UL + 1;
        iterations++;
    }
    printf("iterations %lu\nsignals %ld\n", iterations, signals);
    return x == 0;
}
