#ifndef SUBSYNC_CCURL_SHIM_H
#define SUBSYNC_CCURL_SHIM_H

#include <curl/curl.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#if defined(__linux__)
#include <sys/prctl.h>
#elif defined(__APPLE__)
#include <pthread.h>
#endif

// curl_easy_setopt and curl_easy_getinfo are variadic C functions, which Swift cannot call.
// Each wrapper below fixes the argument type for one family of options, so the Swift side
// stays typed and the C compiler checks every call.

static inline CURLcode subsync_curl_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode subsync_curl_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode subsync_curl_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode subsync_curl_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode subsync_curl_easy_setopt_write_callback(CURL *handle, curl_write_callback callback) {
    return curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, callback);
}

static inline CURLcode subsync_curl_easy_setopt_header_callback(CURL *handle, curl_write_callback callback) {
    return curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, callback);
}

static inline CURLcode subsync_curl_easy_setopt_opensocket_callback(CURL *handle, curl_opensocket_callback callback) {
    return curl_easy_setopt(handle, CURLOPT_OPENSOCKETFUNCTION, callback);
}

static inline CURLcode subsync_curl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode subsync_curl_easy_getinfo_double(CURL *handle, CURLINFO info, double *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode subsync_curl_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLMcode subsync_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

static inline CURLcode subsync_curl_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode subsync_curl_easy_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

/// The value of the CURL_SOCKET_BAD macro, which Swift does not import on every platform.
static inline curl_socket_t subsync_curl_socket_bad(void) {
    return CURL_SOCKET_BAD;
}

/// The result code carried by a CURLMSG_DONE message (`data` is a C union).
static inline CURLcode subsync_curl_msg_result(const CURLMsg *message) {
    return message->data.result;
}

/// Copies the IP address libcurl is about to connect to into `out` (16 bytes of room).
/// Returns 4 for IPv4, 16 for IPv6, 0 for any other family or a malformed address.
/// The address is read in C because `struct curl_sockaddr` declares `addr` as a
/// `struct sockaddr` while libcurl stores a larger `sockaddr_in6` there for IPv6.
static inline int subsync_curl_sockaddr_address(const struct curl_sockaddr *address, unsigned char *out) {
    if (address == NULL || out == NULL) {
        return 0;
    }
    if (address->family == AF_INET && address->addrlen >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in4 = (const struct sockaddr_in *)(const void *)&address->addr;
        memcpy(out, &in4->sin_addr, 4);
        return 4;
    }
    if (address->family == AF_INET6 && address->addrlen >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)&address->addr;
        memcpy(out, &in6->sin6_addr, 16);
        return 16;
    }
    return 0;
}

/// Opens the socket libcurl asked for, close-on-exec so child processes never inherit it.
static inline curl_socket_t subsync_curl_open_socket(const struct curl_sockaddr *address) {
#ifdef SOCK_CLOEXEC
    return socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
#else
    curl_socket_t fd = socket(address->family, address->socktype, address->protocol);
    if (fd != CURL_SOCKET_BAD) {
        (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
    return fd;
#endif
}

/// Parses a textual IPv4 or IPv6 address into `out` (16 bytes of room).
/// Returns 4 or 16 (the number of bytes written), or 0 when `text` is not an address.
static inline int subsync_parse_ip(const char *text, unsigned char *out) {
    if (text == NULL || out == NULL) {
        return 0;
    }
    if (inet_pton(AF_INET, text, out) == 1) {
        return 4;
    }
    if (inet_pton(AF_INET6, text, out) == 1) {
        return 16;
    }
    return 0;
}

/// Formats 4 or 16 address bytes as text into `out` (at least INET6_ADDRSTRLEN = 46 bytes).
/// Returns 1 on success, 0 on failure.
static inline int subsync_format_ip(const unsigned char *bytes, int count, char *out, size_t capacity) {
    int family = count == 4 ? AF_INET : (count == 16 ? AF_INET6 : -1);
    if (family < 0 || bytes == NULL || out == NULL) {
        return 0;
    }
    return inet_ntop(family, bytes, out, (socklen_t)capacity) != NULL ? 1 : 0;
}

/// Makes writes to a closed socket fail with EPIPE instead of killing the process.
static inline void subsync_ignore_sigpipe(void) {
    signal(SIGPIPE, SIG_IGN);
}

/// Names the calling thread (shown by top -H, gdb, /proc/PID/task/*/comm); at most 15 characters on Linux.
static inline void subsync_set_thread_name(const char *name) {
#if defined(__linux__)
    (void)prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL);
#elif defined(__APPLE__)
    (void)pthread_setname_np(name);
#else
    (void)name;
#endif
}

#endif
