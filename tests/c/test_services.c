/* services.c: the registry of services and globals (a hash table), without MPI. */
#include "qmpi_internal.h"
#include "check.h"

/* What services.c reads from the chain (chain.c), here without a chain. */
int qmpi_state = QMPI_DIRECT;
__thread void *qmpi_call_site;
__thread const struct qmpi_call *qmpi_current_call;
int qmpi_recording;
int qmpi_build_chain(void)
{
    return QMPI_DIRECT;
}

static void one(void)
{
}
static void two(void)
{
}

static void registers_and_finds(void)
{
    QMPI_Service_function f = NULL;
    void *data = NULL;
    int x = 1, y = 2;

    CHECK(QMPI_Service_get("count", "v(i)", QMPI_ANY_PROVIDER, &f, &data) == QMPI_SERVICE_NOT_FOUND && f == NULL);
    CHECK(QMPI_Service_register(3, "count", "v(i)", one, &x) == QMPI_SERVICE_OK);
    CHECK(QMPI_Service_register(1, "count", "v(i)", two, &y) == QMPI_SERVICE_OK);
    CHECK(QMPI_Service_get("count", "v(i)", QMPI_ANY_PROVIDER, &f, &data) == QMPI_SERVICE_OK);
    CHECK(f == two && data == &y); /* the lowest level: nearest the application */
    CHECK(QMPI_Service_get("count", "v(i)", 3, &f, &data) == QMPI_SERVICE_OK && f == one && data == &x);
    CHECK(QMPI_Service_get("count", "v(i)", 2, &f, &data) == QMPI_SERVICE_NOT_FOUND);
    /* A global may share a service's name. */
    CHECK(QMPI_Global_get("count", QMPI_ANY_PROVIDER, &data) == QMPI_SERVICE_NOT_FOUND && data == NULL);
    CHECK(QMPI_Global_register(2, "count", &x) == QMPI_SERVICE_OK);
    CHECK(QMPI_Global_get("count", QMPI_ANY_PROVIDER, &data) == QMPI_SERVICE_OK && data == &x);
    CHECK(QMPI_Global_get(NULL, QMPI_ANY_PROVIDER, &data) == QMPI_SERVICE_NOT_FOUND);
}

static void many_names(void)
{
    static int values[20000];
    char name[32];
    void *data;
    int i;

    for (i = 0; i < 20000; i++) {
        snprintf(name, sizeof name, "global-%d", i);
        CHECK(QMPI_Global_register(1 + i % 7, name, &values[i]) == QMPI_SERVICE_OK);
    }
    for (i = 0; i < 20000; i++) {
        snprintf(name, sizeof name, "global-%d", i);
        CHECK(QMPI_Global_get(name, QMPI_ANY_PROVIDER, &data) == QMPI_SERVICE_OK && data == &values[i]);
        CHECK(QMPI_Global_get(name, 1 + (i + 1) % 7, &data) == QMPI_SERVICE_NOT_FOUND);
    }
    CHECK(QMPI_Global_get("global-20000", QMPI_ANY_PROVIDER, &data) == QMPI_SERVICE_NOT_FOUND);
}

static void registered_twice(void)
{
    QMPI_Global_register(1, "g", NULL);
    QMPI_Global_register(1, "g", NULL);
}

static void wrong_signature(void)
{
    QMPI_Service_register(1, "s", "i(i)", one, NULL);
    QMPI_Service_get("s", "v(v)", QMPI_ANY_PROVIDER, NULL, NULL);
}

static void no_name(void)
{
    QMPI_Global_register(4, "", NULL);
}

static void no_function(void)
{
    QMPI_Service_register(2, "s", "v(v)", NULL, NULL);
}

static void stacks_without_conf(void)
{
    CHECK_STR(QMPI_Stack_name(), "default");
    CHECK(QMPI_Stack_lookup("default") == 0 && QMPI_Stack_lookup("heavy") == -1 && QMPI_Stack_lookup(NULL) == -1);
    CHECK_STR(QMPI_Stack_names(), "default");
    CHECK(QMPI_Call_function() == -1 && QMPI_Call_argument(0) == NULL);
}

int main(void)
{
    check_case("registers and finds by provider", registers_and_finds, NULL);
    check_case("20,000 names", many_names, NULL);
    check_case("registered twice", registered_twice, "qmpi: error: level 1 registered the global 'g' twice");
    check_case("wrong signature", wrong_signature,
               "service 's' of level 1 has the signature 'i(i)', asked for as 'v(v)'");
    check_case("no name", no_name, "level 4 registered a global without a name");
    check_case("no function", no_function, "level 2 registered the service 's' without a function");
    check_case("stacks without QMPI_CONF", stacks_without_conf, NULL);
    return check_summary();
}
