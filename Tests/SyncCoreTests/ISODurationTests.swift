import Foundation
import PropertyBased
import SyncCore
import Testing

@Suite struct ISODurationTests {
    @Test func parsesDatePartDurations() {
        #expect(ISODuration("P1M")?.months == 1)
        #expect(ISODuration("P1Y") == ISODuration("P12M"))
        #expect(ISODuration("P1Y6M")?.months == 18)
        #expect(ISODuration("P2W")?.days == 14)
        #expect(ISODuration("P30D")?.days == 30)
        #expect(ISODuration("P1Y6M")?.description == "P1Y6M")
        for bad in ["", "P", "1M", "PM", "P0D", "P1M1Y", "P1H", "PT1H", "P1.5M", "P-1M", "p1m", "P1M ", "P1D1D", "P9999999D"] {
            #expect(ISODuration(bad) == nil, "\(bad)")
        }
    }

    @Test func monthArithmeticClampsToTheEndOfTheMonth() {
        let oneMonth = ISODuration("P1M")
        #expect(oneMonth?.advance(utc(2025, 1, 31, 10, 30)) == utc(2025, 2, 28, 10, 30))
        #expect(oneMonth?.advance(utc(2024, 1, 31)) == utc(2024, 2, 29))  // leap year
        #expect(ISODuration("P1Y")?.advance(utc(2024, 2, 29)) == utc(2025, 2, 28))
        #expect(ISODuration("P3M")?.advance(utc(2025, 11, 15)) == utc(2026, 2, 15))
        #expect(ISODuration("P30D")?.advance(utc(2025, 2, 15)) == utc(2025, 3, 17))
    }

    @Test func agreesWithFoundationsGregorianCalendar() async {
        await propertyCheck(
            count: 500, input: Gen.int(in: 946_684_800...4_102_444_799), Gen.int(in: 0...40), Gen.int(in: 0...400)
        ) { seconds, months, days in
            guard months > 0 || days > 0 else { return }
            var text = "P"
            if months > 0 { text += "\(months)M" }
            if days > 0 { text += "\(days)D" }
            let start = Date(timeIntervalSince1970: Double(seconds))
            let expected = utcCalendar.date(byAdding: DateComponents(month: months, day: days), to: start)
            #expect(ISODuration(text)?.advance(start) == expected, "\(text) from \(start)")
        }
    }
}
