/* The HTTP baseline of scripts/bench/http: libcurl's multi interface driven from C, as little as
 * a sender can do. IN_FLIGHT transfers at once on one multi handle (one connection each, kept
 * alive); each finished transfer's handle is reset and set up again (as the Curl module does)
 * and added back, for SECONDS. Same receiver, body and header count as subsync-bench-http.
 * Usage: curl_baseline URL BODY_FILE IN_FLIGHT SECONDS. Prints "CURLBASE done=N failed=N". */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static size_t discard(char *data, size_t size, size_t count, void *context) {
  (void)data; (void)context;
  return size * count;
}

static double seconds_now(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

static const char *url;
static char *body;
static long body_length;
static struct curl_slist *headers;

static void set_up(CURL *easy) {
  curl_easy_setopt(easy, CURLOPT_URL, url);
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, discard);
  curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_length);
  curl_easy_setopt(easy, CURLOPT_COPYPOSTFIELDS, body);
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, 15000L);
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: curl_baseline URL BODY_FILE IN_FLIGHT SECONDS\n");
    return 2;
  }
  url = argv[1];
  int in_flight = atoi(argv[3]);
  double duration = atof(argv[4]);
  FILE *file = fopen(argv[2], "rb");
  if (!file || fseek(file, 0, SEEK_END) != 0 || (body_length = ftell(file)) < 0) {
    fprintf(stderr, "curl_baseline: cannot read %s\n", argv[2]);
    return 2;
  }
  rewind(file);
  body = malloc((size_t)body_length + 1);
  if (!body || fread(body, 1, (size_t)body_length, file) != (size_t)body_length) {
    fprintf(stderr, "curl_baseline: cannot read %s\n", argv[2]);
    return 2;
  }
  fclose(file);
  headers = curl_slist_append(NULL, "content-type: application/json");
  headers = curl_slist_append(headers, "webhook-id: msg_0_1");
  headers = curl_slist_append(headers, "webhook-timestamp: 1764230400");
  headers = curl_slist_append(headers, "webhook-signature: v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=");
  headers = curl_slist_append(headers, "Expect:");
  curl_global_init(CURL_GLOBAL_ALL);
  CURLM *multi = curl_multi_init();
  curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, (long)in_flight);
  for (int i = 0; i < in_flight; i++) {
    CURL *easy = curl_easy_init();
    set_up(easy);
    curl_multi_add_handle(multi, easy);
  }
  long done = 0, failed = 0;
  int running = 0;
  double end = seconds_now() + duration;
  while (seconds_now() < end) {
    curl_multi_perform(multi, &running);
    CURLMsg *message;
    int left;
    while ((message = curl_multi_info_read(multi, &left))) {
      if (message->msg != CURLMSG_DONE) continue;
      CURL *easy = message->easy_handle;
      long status = 0;
      curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
      if (message->data.result == CURLE_OK && status >= 200 && status < 300) done++; else failed++;
      curl_multi_remove_handle(multi, easy);
      curl_easy_reset(easy);
      set_up(easy);
      curl_multi_add_handle(multi, easy);
    }
    curl_multi_poll(multi, NULL, 0, 1000, NULL);
  }
  printf("CURLBASE done=%ld failed=%ld\n", done, failed);
  return failed == 0 ? 0 : 1;
}
